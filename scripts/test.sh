#!/usr/bin/env bash
# The whole test suite: installs what it needs, then runs ruff and pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k tune).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap-python.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
