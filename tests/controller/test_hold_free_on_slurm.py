"""Where Slurm honours lowering a job it has scheduled (26.05), known profiles need no hold:
the controller writes hold_known = false into the hook's table, a known job starts at once
with its table shape, and only jobs without a known profile wait for a round. Where it does
not (22.05), both wait. Prints the submit-to-start times of each path."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from synergy_slurm.controller.daemon import Controller
from synergy_slurm.hook.table import TABLE_NAME, parse_table
from synergy_slurm.slurm.reader import SlurmReader

from ..slurm.helpers import submit, wait_file, wait_for
from .conftest import load
from .test_controller_on_slurm import REPORT, held_ids

pytestmark = pytest.mark.slurm
ROUND_AFTER_S = 5.0     # the controller's next round comes this long after the submissions


def waited(fields: dict) -> float:
    start, submit_ = (datetime.fromisoformat(fields[k]) for k in ("StartTime", "SubmitTime"))
    return (start - submit_).total_seconds()


def test_known_profiles_start_unheld_where_slurm_can_lower_them(env, capsys):
    cli, tmp = env["cli"], env["tmp"]
    ctl = Controller(load(env))                  # the config says hold_known = true
    ctl.run_round()                              # ... and the round writes the table
    lowers = SlurmReader(cli).release.lowers_pending
    table = parse_table((env["cluster"].etc / TABLE_NAME).read_text())
    assert table.hold_known is (not lowers) and table.hold_unknown
    known = submit(cli, REPORT, "--gpus=1", "--comment=synergy:profile=alexnet",
                   "-o", str(tmp / "known"), tmp=tmp)
    unknown = submit(cli, REPORT, "--gpus=1", "-o", str(tmp / "unknown"), tmp=tmp)
    time.sleep(ROUND_AFTER_S)
    held = set(held_ids(cli))
    assert unknown in held and (known in held) is (not lowers)
    assert ctl.run_round().errors == 0
    fields = {j: wait_for(cli, j, {"COMPLETED"}, 60) for j in (known, unknown)}
    assert "cpus=12" in wait_file(tmp / "known", "cpus=")        # alexnet's table shape
    with capsys.disabled():
        print(f"\nSlurm {SlurmReader(cli).release}: submit -> start of a known profile "
              f"{waited(fields[known]):.0f} s ({'unheld' if lowers else 'held'}), of an "
              f"unknown one {waited(fields[unknown]):.0f} s (held until the round "
              f"{ROUND_AFTER_S:.0f} s later)")
