#!/usr/bin/env bash
# Make .venv/ with synergy-slurm and its test tools installed. Safe to run again.
# On a fresh Debian machine (as root) it installs python3-venv first if it is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Prefer the system's Python: a venv made from it can be run by every user (the tests
# submit jobs as an unprivileged user; a Python under /root, like pyenv's, cannot).
if [ -z "${PYTHON:-}" ] && /usr/bin/python3 -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    PY=/usr/bin/python3
else
    PY=${PYTHON:-python3}
fi
if ! "$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    echo "synergy-slurm needs Python >= 3.11 ($PY is $("$PY" -V 2>&1))" >&2
    exit 1
fi
if ! "$PY" -m venv --help >/dev/null 2>&1 || ! "$PY" -c 'import ensurepip' 2>/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    else
        echo "python venv support is missing: install python3-venv" >&2
        exit 1
    fi
fi
base=$("$PY" -c 'import sys; print(sys.base_prefix)')
if [ -x .venv/bin/python ] && [ "$(.venv/bin/python -c 'import sys; print(sys.base_prefix)')" != "$base" ]; then
    echo "bootstrap-python: .venv was made from another Python; making it again from $PY"
    rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -e "$stamp" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,torch]'
    rm -f .venv/.installed-*
    touch "$stamp"
fi
