"""`synergy controller snapshot` and `replay` on the live cluster: the replay of a saved
snapshot plans what a dry run of the controller plans, and neither changes a job."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.slurm import recording

from ..slurm.helpers import job_fields, submit
from .test_controller_on_slurm import fresh_table, held_ids

pytestmark = pytest.mark.slurm


def test_a_live_snapshot_replays_to_the_plan_a_dry_run_makes(env):
    fresh_table(env)
    cli, tmp = env["cli"], env["tmp"]
    high = submit(cli, "true", "--gpus=1", "--comment=synergy:profile=alexnet",
                  "-o", "/dev/null", tmp=tmp)
    low = submit(cli, "true", "--gpus=2", "--comment=synergy:profile=gnmt",
                 "-o", "/dev/null", tmp=tmp)
    assert sorted(held_ids(cli)) == sorted([high, low])
    keys = ("JobState", "Priority", "CpusPerTres", "MemPerTres", "NumCPUs")
    before = {j: {k: job_fields(cli, j).get(k) for k in keys} for j in (high, low)}
    cfg = str(env["cfg_path"])
    snap = tmp / "snap"
    res = CliRunner().invoke(main, ["controller", "snapshot", "--config", cfg, str(snap)])
    assert res.exit_code == 0, res.output
    assert (snap / recording.JOBS).is_file() and (snap / recording.TAKEN).is_file()
    replayed = CliRunner().invoke(main, ["controller", "replay", "--config", cfg,
                                         "--format", "json", str(snap)])
    assert replayed.exit_code == 0, replayed.output
    dry = CliRunner().invoke(main, ["controller", "run", "--config", cfg, "--once",
                                    "--dry-run", "--format", "json"])
    assert dry.exit_code == 0, dry.output
    out = json.loads(replayed.stdout)
    # The same plan (the actions' order follows the reader's order of the jobs: the
    # snapshot is squeue --json, the dry run reads with [slurm] reader).
    by_job = lambda acts: sorted(acts, key=lambda a: a["job_id"])  # noqa: E731
    assert by_job(out["actions"]) == by_job(json.loads(dry.stdout))
    assert {a["job_id"] for a in out["actions"]} == {high, low}
    assert f"release {high}" in out["slurm_changes"]
    assert f"release {low}" in out["slurm_changes"]
    # Neither the replay nor the dry run sent anything: both jobs are as they were.
    assert sorted(held_ids(cli)) == sorted([high, low])
    assert {j: {k: job_fields(cli, j).get(k) for k in keys} for j in (high, low)} == before
