"""Issue 45, item 11: a lowering Slurm took and then ignored is reported as ignored when the
job starts with its old cores (never left as done), and a controller killed mid-write
leaves no temporaries of the hook table behind once it starts again."""

from __future__ import annotations

import os
import time

from synergy_slurm.controller.lowered import LoweredWatch
from synergy_slurm.hook.table import TABLE_NAME, stale_temporaries
from synergy_slurm.slurm.model import NodeAlloc
from synergy_slurm.slurm.writer import Shape

from .test_round_without_slurm import audit, controller, job, snapshot


def test_a_lowering_the_job_starts_without_is_reported_as_ignored(tmp_path, profiles_path):
    """Round 1 lowers a held job from 20 cores/GPU and Slurm's read-back says done; the job
    then starts holding 20 cores for its GPU: round 2 says the lowering was ignored (audit,
    state, metric). A job that starts with its new shape is not reported."""
    held = job(5, cpus_per_gpu=20, cpus=20)
    ctl, writer = controller(tmp_path, profiles_path, snapshot(held))
    res = ctl.run_round()
    ((_, _, shape),) = [c for c in writer.calls if c[0] == "reshape"]
    assert shape.cpus_per_gpu < 20 and str(res.results[5]) == "done"
    assert len(ctl.lowered) == 1
    started = job(5, state="RUNNING", priority=1, reason="None", cpus_per_gpu=shape.cpus_per_gpu,
                  cpus=20, alloc=(NodeAlloc("n1", 20, 1000, 1),), admin_comment="")
    ctl.reader.snap = snapshot(started)  # type: ignore[attr-defined]
    ctl.run_round()
    (line,) = [x for x in audit(tmp_path) if x["action"] == "lower-ignored"]
    assert line["job_id"] == 5 and line["result"].startswith("ignored")
    assert "with 20 cores for 1 GPUs" in line["reason"]
    assert ctl.metrics.errors.labels("ignored")._value.get() == 1
    assert len(ctl.lowered) == 0
    ctl.run_round()                                   # reported once
    assert len([x for x in audit(tmp_path) if x["action"] == "lower-ignored"]) == 1


def test_a_lowering_the_job_starts_with_is_not_reported():
    watch = LoweredWatch()
    watch.note(7, Shape(8, 4000), Shape(2, 3000))
    watch.note(8, Shape(2, 3000), Shape(6, 3000))      # a raise: nothing to check
    assert len(watch) == 1
    assert watch.check([job(7)]) == [] and len(watch) == 1          # still pending
    ok = job(7, state="RUNNING", cpus=2, alloc=(NodeAlloc("n1", 2, 3000, 1),))
    assert watch.check([ok]) == [] and len(watch) == 0
    watch.note(9, Shape(8, 4000), Shape(2, 3000))
    assert watch.check([]) == [] and len(watch) == 0                # gone: forgotten


def test_stale_temporaries_are_removed_at_start_and_a_live_writers_kept(tmp_path,
                                                                         profiles_path):
    old = tmp_path / ".synergy-hook.abcd1234"
    old.write_text("half a table")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    fresh = tmp_path / ".synergy-hook.efgh5678"
    fresh.write_text("being written")
    other = tmp_path / ".something-else"
    other.write_text("not ours")
    os.utime(other, (time.time() - 3600, time.time() - 3600))
    ctl, _ = controller(tmp_path, profiles_path, snapshot(job(5)))
    assert ctl.clean_temporaries() == [old]
    assert not old.exists() and fresh.exists() and other.exists()
    assert stale_temporaries(tmp_path, time.time() + 3600) == [fresh]
    assert stale_temporaries(tmp_path / "missing", time.time()) == []


def test_a_daemon_that_starts_cleans_them(tmp_path, profiles_path):
    import threading

    left = tmp_path / ".synergy-hook.k1lled00"
    left.write_text("version 1\n")
    os.utime(left, (time.time() - 600, time.time() - 600))
    ctl, _ = controller(tmp_path, profiles_path, snapshot(job(5)))
    stop = threading.Event()
    stop.set()                                         # start, clean, stop at once
    assert ctl.run(stop) == 0
    assert not left.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".synergy-hook.")] == []
    assert not (tmp_path / TABLE_NAME).exists() or (tmp_path / TABLE_NAME).is_file()
