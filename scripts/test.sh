#!/usr/bin/env bash
# The whole test suite: installs what it needs (Debian packages as root, a Python venv),
# then runs ruff and pytest. Tests marked `slurm` start a real 4-node Slurm cluster: the
# whole suite runs on the system's Slurm (22.05 on Debian 12), then the real-Slurm tests
# run again on each release in SYNERGY_TEST_RELEASES (default: 24.11 and 26.05, Debian 13's
# and sid's, each from a root filesystem built once and cached; see `synergy dev-cluster up
# --help`).
# Extra arguments go to every pytest run (e.g. scripts/test.sh -k tune).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap-system.sh
bash scripts/bootstrap-python.sh
.venv/bin/ruff check .
# Strict types on the pure core, the Slurm adapter and the controller ([tool.mypy]).
.venv/bin/mypy
# pyslurm (the vendored 24.11.0) runs inside the 24.11 root: build that root's venv with it
# (once: about 3.5 minutes on 2 cores, kept with the root; a stamp check when already
# built), so the 24.11 pass runs the pyslurm tests (tests/controller/
# test_pyslurm_on_slurm.py, about 10 s). Without the vendored source they skip, saying so.
cache="${SYNERGY_ROOT_CACHE:-/var/cache/synergy-slurm/roots}"
pyslurm_src="${SYNERGY_SHARED:-../shared}/vendor/pyslurm-24.11.0.tar.gz"
if [[ " ${SYNERGY_TEST_RELEASES-24.11 26.05} " == *" 24.11 "* ]] && [ -f "$pyslurm_src" ] \
        && [ "$(id -u)" = 0 ] && [ "${SYNERGY_SKIP_SLURM:-}" != 1 ]; then
    echo "== pyslurm for Slurm 24.11 in $cache/24.11" >&2
    start=$SECONDS
    .venv/bin/synergy dev-cluster venv --slurm 24.11 --cache "$cache" --pyslurm "$pyslurm_src"
    echo "== pyslurm venv ready after $((SECONDS - start)) s" >&2
fi
# --durations: where the suite's time goes, in every log (the CI budget is 25 minutes).
.venv/bin/python -m pytest --durations=15 "$@"
for release in ${SYNERGY_TEST_RELEASES-24.11 26.05}; do
    echo "== the real-Slurm tests on Slurm $release" >&2
    rc=0
    SYNERGY_TEST_SLURM="$release" .venv/bin/python -m pytest -m slurm --durations=10 "$@" || rc=$?
    # With a filter of the caller's, "no tests selected" (5) is not a failure here.
    if [ "$rc" -ne 0 ] && ! { [ "$rc" -eq 5 ] && [ $# -gt 0 ]; }; then
        exit "$rc"
    fi
done
