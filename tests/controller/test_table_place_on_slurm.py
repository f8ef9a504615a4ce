"""Issue 45, item 10, on the real cluster: the dev cluster's hook reads its table where its
controller writes it (jobs come tagged), and a controller whose table the hook does not
read notices within rounds that new GPU jobs arrive untagged (log, status, metric)."""

from __future__ import annotations

import time
import tomllib

import pytest

from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.controller.status import status_lines
from synergy_slurm.controller.tagwatch import GRACE_S
from synergy_slurm.hook.install import installed_table_dir
from synergy_slurm.slurm.reader import SlurmReader

from ..slurm.helpers import submit

pytestmark = pytest.mark.slurm


def _controller(env, **hook) -> Controller:
    doc = tomllib.loads(env["cfg_path"].read_text())
    doc["hook"].update(hook)
    doc["controller"]["metrics_port"] = 0
    return Controller(config_from_dict(doc))


def _rounds_until(ctl: Controller, done, n: int = 20) -> None:
    for _ in range(n):
        ctl.run_round()
        if done():
            return
        time.sleep(0.5)


def test_the_hook_reads_the_table_the_controller_writes(env):
    """The test cluster's hook was installed by the dev cluster's --hook: its line names the
    directory the controller's config writes the table in, and jobs come tagged."""
    cluster, cli, tmp = env["cluster"], env["cli"], env["tmp"]
    assert installed_table_dir(cluster.etc) == cluster.etc
    ctl = _controller(env)
    assert ctl.table_place_problem() is None
    ctl.run_round()                                       # writes a fresh table
    time.sleep(GRACE_S + 1)
    ids = [submit(cli, "sleep 1", "--gpus=1", "--hold", "-o", "/dev/null", tmp=tmp)
           for _ in range(2)]
    _rounds_until(ctl, lambda: len(ctl.tags._seen) >= 2, 6)
    jobs = {j.job_id: j for j in SlurmReader(cli).snapshot().jobs}
    assert all("managed" in jobs[i].tags for i in ids)
    assert ctl.metrics.untagged._value.get() == 0 and not ctl.state.notices()


def test_a_controller_whose_table_the_hook_does_not_read_notices_untagged_jobs(env):
    """The config names a hook directory with no job_submit.lua (the site keeps it
    elsewhere) and a state directory the real hook never reads: nothing at start can tell,
    but the jobs come untagged, and within a few rounds the controller says so."""
    cli, tmp = env["cli"], env["tmp"]
    elsewhere = tmp / "state"
    elsewhere.mkdir()
    ctl = _controller(env, dir=str(tmp), state_dir=str(elsewhere))
    assert ctl.table_place_problem() is None              # no installed hook to read there
    ctl.run_round()
    assert (elsewhere / "synergy-hook.table").exists()
    time.sleep(GRACE_S + 1)
    for _ in range(2):
        submit(cli, "sleep 1", "--gpus=1", "--hold", "-o", "/dev/null", tmp=tmp)
    _rounds_until(ctl, lambda: ctl.tags.blind, 6)
    assert ctl.tags.blind and ctl.metrics.untagged._value.get() == 2
    (notice,) = ctl.state.notices()
    assert "arrived without the hook's tag" in notice["text"] and str(elsewhere) in notice["text"]
    assert any(x.startswith("warning: 2 new GPU jobs") for x in status_lines(ctl.state))
