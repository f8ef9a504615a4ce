#!/usr/bin/env bash
# The whole test suite: installs what it needs (Debian packages as root, a Python venv),
# then runs ruff and pytest. Tests marked `slurm` start a real 4-node Slurm cluster: the
# whole suite runs on the system's Slurm (22.05 on Debian 12) while the real-Slurm tests
# run again, side by side, on each release in SYNERGY_TEST_RELEASES (default: 24.11 and
# 26.05, Debian 13's and sid's, each from a root filesystem built once and cached; see
# `synergy dev-cluster up --help`).
# Extra arguments go to every pytest run (e.g. scripts/test.sh -k tune).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap-system.sh
bash scripts/bootstrap-python.sh
.venv/bin/ruff check .
# Strict types on the pure core, the Slurm adapter and the controller ([tool.mypy]).
.venv/bin/mypy
# The real-Slurm tests mostly wait on Slurm (the CPUs idle about 90% of a pass), so each
# release's pass (the system's, then each in SYNERGY_TEST_RELEASES) runs beside the others
# and beside the unit tests, which keep one CPU busy, each in its own slot (tests/conftest.py:
# own cluster directories, ports and job ids); a pass's output is printed when it has
# ended. --durations: where the time goes, in every log (the CI budget is 25 minutes).
# The test users exist before the passes and go after the last (a pass that removed the
# users it made would pull them from under the others).
made_users=()
if [ "$(id -u)" = 0 ]; then
    for user in synergy-t-user synergy-t-ctl; do
        if ! id "$user" > /dev/null 2>&1 && useradd -M "$user"; then made_users+=("$user"); fi
    done
fi
logs=$(mktemp -d /tmp/synergy-test-logs.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
    for user in "${made_users[@]}"; do userdel "$user" 2> /dev/null || true; done
    rm -rf "$logs"
}
trap cleanup EXIT
releases=(${SYNERGY_TEST_RELEASES-24.11 26.05})
# pyslurm (the vendored 24.11.0) runs inside the 24.11 root: the 24.11 pass first builds
# that root's venv with it (once: about 3.5 minutes on 2 cores, kept with the root; a stamp
# check when already built), so that it runs the pyslurm tests (tests/controller/
# test_pyslurm_on_slurm.py). Without the vendored source they skip, saying so.
cache="${SYNERGY_ROOT_CACHE:-/var/cache/synergy-slurm/roots}"
pyslurm_src="${SYNERGY_SHARED:-../shared}/vendor/pyslurm-24.11.0.tar.gz"
release_pass() {   # SLOT RELEASE [pytest arguments]
    local slot=$1 release=$2
    shift 2
    if [ "$release" = 24.11 ] && [ -f "$pyslurm_src" ] && [ "$(id -u)" = 0 ] \
            && [ "${SYNERGY_SKIP_SLURM:-}" != 1 ] && [ "$slot" -lt "${#passes[@]}" ]; then
        echo "== pyslurm for Slurm 24.11 in $cache/24.11"
        local start=$SECONDS
        .venv/bin/synergy dev-cluster venv --slurm 24.11 --cache "$cache" \
            --pyslurm "$pyslurm_src" || return
        echo "== pyslurm venv ready after $((SECONDS - start)) s"
    fi
    SYNERGY_TEST_SLOT=$slot SYNERGY_TEST_SLURM=$release .venv/bin/python -m pytest \
        -m "slurm and not timing" --durations=10 -p no:cacheprovider \
        --basetemp="$logs/tmp-$slot" "$@"
}
passes=(system "${releases[@]}")
# The whole suite (no arguments): the files that train PyTorch or run the demo's workload
# (five of a pass's 14 minutes in ci7) make a second pass per release (slots 3-5), started
# once the unit tests have ended: then no pass is the long pole one pass per release was,
# and those files never meet the unit tests' busiest minutes (ci5 split every release's
# files in halves from the start: a PyTorch job missed its wait beside them). A caller's
# filter or file gets one pass per release, as given.
late_files=()
early=("$@")
if [ $# -eq 0 ]; then
    late_files=(tests/cli/test_demo_on_slurm.py tests/templates/test_templates_on_slurm.py)
    early=("${late_files[@]/#/--ignore=}")
fi
names=()
for i in "${!passes[@]}"; do
    release_pass "$i" "${passes[$i]}" "${early[@]}" > "$logs/$i.log" 2>&1 &
    pids+=($!)
    names+=("${passes[$i]}")
done
# A pass's code counts unless it is 0, or 5 ("no tests selected") under a caller's filter.
no_tests_ok() { [ "$1" -eq 0 ] || { [ "$1" -eq 5 ] && [ $# -gt 1 ]; }; }
rc=0
echo "== the unit, property and command tests (beside the real-Slurm passes)" >&2
.venv/bin/python -m pytest -m "not slurm and not timing" --durations=15 "$@" || rc=$?
no_tests_ok "$rc" "$@" && rc=0
if [ ${#late_files[@]} -gt 0 ]; then
    for i in "${!passes[@]}"; do
        slot=$((i + ${#passes[@]}))
        release_pass "$slot" "${passes[$i]}" "${late_files[@]}" > "$logs/$slot.log" 2>&1 &
        pids+=($!)
        names+=("${passes[$i]}, the PyTorch and demo files")
    done
fi
for i in "${!names[@]}"; do
    pass_rc=0
    wait "${pids[$i]}" || pass_rc=$?
    echo "== the real-Slurm tests on Slurm ${names[$i]}" >&2
    cat "$logs/$i.log"
    no_tests_ok "$pass_rc" "$@" || { [ "$rc" -ne 0 ] || rc=$pass_rc; }
done
pids=()
# Tests that measure throughput on the CPUs run alone, once the passes have ended (beside
# them a point read 3-20% low).
echo "== the timing tests, alone" >&2
timing_rc=0
.venv/bin/python -m pytest -m timing "$@" || timing_rc=$?
no_tests_ok "$timing_rc" "$@" || { [ "$rc" -ne 0 ] || rc=$timing_rc; }
for release in "${releases[@]}"; do
    timing_rc=0
    SYNERGY_TEST_SLURM="$release" .venv/bin/python -m pytest -m "slurm and timing" \
        -p no:cacheprovider "$@" || timing_rc=$?
    no_tests_ok "$timing_rc" "$@" || { [ "$rc" -ne 0 ] || rc=$timing_rc; }
done
exit "$rc"
