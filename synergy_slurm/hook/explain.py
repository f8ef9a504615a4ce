"""What the hook would do to a submission, with the table and kill switch on disk: the one
place ``synergy hook explain`` and ``synergy-sbatch --explain`` read them."""

from __future__ import annotations

from pathlib import Path

from .rules import HookDecision, Submission, decide
from .table import DISABLE_NAME, TableError, parse_table


def explain(table_file: Path, sub: Submission, now: float) -> HookDecision:
    table, err = None, None
    try:
        table = parse_table(table_file.read_text())
    except OSError:
        err = f"no hook table at {table_file} (controller not running?)"
    except TableError as exc:
        err = str(exc)
    disabled = (table_file.parent / DISABLE_NAME).exists()
    return decide(table, sub, now, disabled=disabled, table_error=err)
