#!/usr/bin/env bash
# The whole test suite: installs what it needs (Debian packages as root, a Python venv),
# then runs ruff and pytest. Tests marked `slurm` start a real 4-node Slurm cluster.
# Extra arguments go to pytest (e.g. scripts/test.sh -k tune).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap-system.sh
bash scripts/bootstrap-python.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
