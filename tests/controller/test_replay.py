"""`synergy controller snapshot` and `replay`: a round planned on Slurm's saved output,
changing nothing, on recorded output (a 22.05 queue with a job the hook held); on the live
cluster: test_replay_on_slurm.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.slurm import recording

FIXTURES = Path(__file__).resolve().parents[1] / "slurm" / "fixtures"


@pytest.fixture
def snapshot_dir(tmp_path) -> Path:
    """The 22.05 fixtures as a snapshot; job 4 (1 GPU) held by the hook, labelled alexnet."""
    where = tmp_path / "snap"
    where.mkdir()
    doc = json.loads((FIXTURES / "squeue_22.05.8.json").read_text())
    for job in doc["jobs"]:
        if job["job_id"] == 4:
            job["comment"] = "synergy:profile=alexnet"
            job["admin_comment"] = "synergy.managed=1,synergy.held=1"
    (where / recording.JOBS).write_text(json.dumps(doc))
    shutil.copy(FIXTURES / "sinfo_22.05.8.json", where / recording.NODES)
    shutil.copy(FIXTURES / "partitions_22.05.8.txt", where / recording.PARTITIONS)
    (where / recording.VERSION).write_text("slurm 22.05.8\n")
    (where / recording.TAKEN).write_text("1765000000\n")
    return where


@pytest.fixture
def site_config(tmp_path, profiles_path) -> Path:
    state = tmp_path / "site-state"
    path = tmp_path / "synergy.toml"
    path.write_text(f'[profiles]\nfile = "{profiles_path}"\nstore = "{state}/p.db"\n'
                    f'[controller]\nmode = "enforce"\nstate_db = "{state}/state.db"\n'
                    f'audit_log = "{state}/audit.jsonl"\n[hook]\nstate_dir = "{state}"\n')
    return path


def test_a_replay_lists_the_plan_and_the_changes_and_writes_nothing(snapshot_dir,
                                                                    site_config, tmp_path):
    res = CliRunner().invoke(main, ["controller", "replay", "--config", str(site_config),
                                    "--format", "json", str(snapshot_dir)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["errors"] == 0
    # Job 9 (8 GPUs) and job 10 wait for GPUs while 7 are free (6 on n4): alexnet's 12
    # cores on n4 would leave its other 5 free GPUs 6 cores, under what job 9 needs there,
    # so the plan keeps their proportional room and alexnet starts at its share.
    assert out["actions"] == [{"job_id": 4, "action": "shape-release",
                               "before": {"cpus_per_gpu": 3, "mem_per_gpu_mb": 62500},
                               "after": {"cpus_per_gpu": 3, "mem_per_gpu_mb": 62500},
                               "reason": "self-downgrade share, speedup 1.00x"}]
    assert out["slurm_changes"] == ["reshape 4 3c/62500MB", "release 4", "untag 4"]
    # The site's state, audit log, hook table and profile store: none written.
    assert not (tmp_path / "site-state").exists()
    text = CliRunner().invoke(main, ["controller", "replay", "--config", str(site_config),
                                     str(snapshot_dir)])
    assert "would ask Slurm: reshape 4 3c/62500MB" in text.output
    assert "[done]" not in text.output


def test_a_snapshot_is_read_back_with_its_release_and_time(snapshot_dir):
    saved = recording.load(snapshot_dir)
    assert saved.taken_at == 1765000000.0
    assert str(saved.reader.release) == "22.05.8"
    assert saved.reader.limits() is None          # no accounting saved
    assert {j.job_id for j in saved.reader.snapshot().jobs} >= {1, 4, 9}


@pytest.mark.parametrize("spoil, message", [
    (lambda d: (d / recording.NODES).unlink(), "no nodes.json"),
    (lambda d: (d / recording.VERSION).write_text("nonsense\n"), "version.txt"),
    (lambda d: (d / recording.TAKEN).write_text("yesterday\n"), "not a time"),
    (lambda d: (d / recording.JOBS).write_text("{not json"), "snap"),
])
def test_a_damaged_snapshot_is_bad_input(snapshot_dir, site_config, spoil, message):
    spoil(snapshot_dir)
    res = CliRunner().invoke(main, ["controller", "replay", "--config", str(site_config),
                                    str(snapshot_dir)])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


