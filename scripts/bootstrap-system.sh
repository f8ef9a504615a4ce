#!/usr/bin/env bash
# System packages the test suite uses, from Debian's archive, installed only if missing:
# Slurm and munge (the real test cluster), docker.io and docker-compose (the compose
# cluster, docker-compose.slurm.yml, brought up by its test), lua5.1 and lua-filesystem (the hook),
# mmdebstrap (root filesystems with other Slurm releases, for the release matrix),
# slurmdbd and mariadb-server (the cluster's accounting: a private database, never the
# system's service), chromium (the what-if report opened as an admin would), prometheus
# (its promtool checks and tests the shipped alert rules, docs/prometheus/).
set -euo pipefail
need=()
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sinfo >/dev/null || need+=(slurm-client)
command -v munged >/dev/null || need+=(munge)
command -v slurmdbd >/dev/null || [ -x /usr/sbin/slurmdbd ] || need+=(slurmdbd)
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
command -v docker-compose >/dev/null || need+=(docker-compose)
# dockerd for the compose cluster's test (scripts/compose-cluster.sh starts it when none runs).
command -v dockerd >/dev/null || need+=(docker.io)
command -v lua5.1 >/dev/null || need+=(lua5.1)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
# A real browser for the what-if report's test (tests/whatif/test_report_browser.py).
command -v chromium >/dev/null || need+=(chromium)
# promtool for the alert rules' tests (tests/controller/test_alert_rules.py); the package's
# Prometheus server is not started by the tests.
command -v promtool >/dev/null || need+=(prometheus)
# LuaFileSystem lets the hook notice a new table at once (slurmctld's Lua is 5.1).
[ -e /usr/lib/x86_64-linux-gnu/lua/5.1/lfs.so ] || ls /usr/lib/*/lua/5.1/lfs.so >/dev/null 2>&1 \
    || need+=(lua-filesystem)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "missing ${need[*]}: install them (Debian: apt-get install ${need[*]})" >&2
    exit 1
fi
echo "installing ${need[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
