#!/usr/bin/env bash
# The compose cluster (docker-compose.slurm.yml), up and down in one command each, as root:
#   scripts/compose-cluster.sh up      # dockerd if none runs, the images, the containers
#   scripts/compose-cluster.sh down    # containers, network, volumes; dockerd if we started it
#   scripts/compose-cluster.sh status  # the containers and sinfo from the login container
# `up` starts dockerd when no daemon answers (--iptables=false --bridge=none: the cluster's
# network is internal and needs no NAT), makes the base image debian:bookworm-slim locally
# when it is missing (mmdebstrap from Debian's registry piped into `docker import`: nothing
# is pulled), gathers the wheels the image installs (build/docker/wheels, from this
# checkout and the host's pip configuration), builds synergy-slurm-dev:latest with the
# host's network (apt-get in the build), starts the containers and waits until the 4 nodes
# are idle. `down` removes everything of ours but the images (the cache for the next up).
# Environment: SYNERGY_DEBIAN_MIRROR (default deb.debian.org), PYTHON (the Python whose pip
# gathers the wheels; default .venv/bin/python), SYNERGY_COMPOSE_TIMEOUT (seconds until
# the nodes are idle; default 180).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PROJECT=synergy-slurm
COMPOSE=(docker-compose -p "$PROJECT" -f docker-compose.slurm.yml)
IMAGE=synergy-slurm-dev:latest
BASE=debian:bookworm-slim
RUNDIR=/run/synergy-compose
MIRROR=${SYNERGY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PYTHON=${PYTHON:-.venv/bin/python}

say() { echo "[compose-cluster] $*" >&2; }
die() { say "$*"; exit 1; }

daemon_answers() { docker info >/dev/null 2>&1; }

start_dockerd() {
    daemon_answers && return 0
    command -v dockerd >/dev/null || die "no docker daemon runs and dockerd is not installed \
(Debian: apt-get install docker.io; scripts/bootstrap-system.sh does it)"
    [ "$(id -u)" = 0 ] || die "no docker daemon runs; starting one needs root"
    mkdir -p "$RUNDIR"
    say "starting dockerd (log $RUNDIR/dockerd.log); down stops it again"
    dockerd --iptables=false --ip6tables=false --bridge=none \
        --pidfile "$RUNDIR/dockerd.pid" >"$RUNDIR/dockerd.log" 2>&1 &
    for _ in $(seq 1 60); do
        daemon_answers && return 0
        kill -0 $! 2>/dev/null || break
        sleep 0.5
    done
    tail -5 "$RUNDIR/dockerd.log" >&2 || true
    die "dockerd did not start (log above, $RUNDIR/dockerd.log)"
}

stop_dockerd() {
    [ -s "$RUNDIR/dockerd.pid" ] || return 0
    local pid
    pid=$(cat "$RUNDIR/dockerd.pid")
    if kill -0 "$pid" 2>/dev/null; then
        say "stopping the dockerd we started (pid $pid)"
        kill "$pid"
        for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) did not stop"
    fi
    rm -rf "$RUNDIR"
}

base_image() {
    docker image inspect "$BASE" >/dev/null 2>&1 && return 0
    command -v mmdebstrap >/dev/null || die "mmdebstrap is needed to make $BASE locally \
(apt-get install mmdebstrap)"
    say "making $BASE locally: mmdebstrap bookworm from $MIRROR into docker import"
    mmdebstrap --variant=minbase --quiet bookworm - "$MIRROR" | docker import - "$BASE" >/dev/null
}

# pip's output goes to a log, shown (without the host's index warnings) only on failure.
pip_quietly() {
    local log=build/docker/pip.log
    "$PYTHON" -m pip "$@" >"$log" 2>&1 && return 0
    { grep -v "^WARNING: Location" "$log" || true; } | tail -20 >&2
    die "pip $1 failed gathering the image's wheels (log above, $log)"
}

wheels() {
    local dir=build/docker/wheels
    [ -x "$PYTHON" ] || PYTHON=$(command -v python3)
    rm -rf "$dir"
    mkdir -p "$dir"
    say "gathering the image's wheels in $dir with $PYTHON"
    pip_quietly wheel -q --no-deps -w "$dir" .
    # The image's Python is bookworm's 3.11 (glibc 2.36), whatever Python gathers them;
    # both platforms are needed (this pip does not widen manylinux_2_28 to manylinux2014).
    pip_quietly download -q -d "$dir" --only-binary=:all: --python-version 3.11 \
        --implementation cp --platform manylinux_2_28_x86_64 \
        --platform manylinux2014_x86_64 "$dir"/synergy_slurm-*.whl
}

wait_idle() {
    local limit=${SYNERGY_COMPOSE_TIMEOUT:-180} start=$SECONDS out=""
    while [ $((SECONDS - start)) -lt "$limit" ]; do
        out=$("${COMPOSE[@]}" exec -T login bash -lc 'sinfo -h -N -o "%N %t"' 2>/dev/null || true)
        if [ "$(grep -c ' idle$' <<<"$out")" -ge 4 ]; then
            say "4 nodes idle after $((SECONDS - start)) s"
            return 0
        fi
        sleep 1
    done
    say "nodes not idle after $limit s; sinfo said: ${out:-nothing}"
    "${COMPOSE[@]}" logs --tail 20 >&2 || true
    die "the cluster did not come up (scripts/compose-cluster.sh down cleans up)"
}

case "${1:-}" in
    up)
        t0=$SECONDS
        start_dockerd
        base_image
        wheels
        say "building $IMAGE"
        docker build -q --network host -t "$IMAGE" -f scripts/docker/Dockerfile . >/dev/null
        "${COMPOSE[@]}" up -d --no-build
        wait_idle
        say "up in $((SECONDS - t0)) s; a shell: ${COMPOSE[*]} exec login su - alice"
        ;;
    down)
        if daemon_answers; then
            "${COMPOSE[@]}" down -v --remove-orphans --timeout 5
        fi
        stop_dockerd
        ;;
    status)
        daemon_answers || die "no docker daemon runs"
        "${COMPOSE[@]}" ps
        "${COMPOSE[@]}" exec -T login bash -lc 'sinfo'
        ;;
    *)
        echo "usage: scripts/compose-cluster.sh up | down | status" >&2
        exit 2
        ;;
esac
