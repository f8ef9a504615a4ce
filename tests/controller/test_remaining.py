"""What a running job has left decides whether a requeue pays: its own progress reports,
else its key's history of durations, else its time limit; the requeue's reason says which.
Each case below is one where the sources disagree, so the one used decides the outcome."""

from __future__ import annotations

import math
import os
import pwd
from dataclasses import replace

import pytest

from profiler.progress import TOTAL_EVERY, Progress
from synergy_slurm.controller.classify import UNKNOWN_REMAINING_S, remaining
from synergy_slurm.controller.state import StateStore
from synergy_slurm.controller.usage import progress_left_s, read_steps
from synergy_slurm.decide.view import Left
from synergy_slurm.slurm.model import NodeAlloc
from synergy_slurm.slurm.writer import Shape

from .test_round_without_slurm import NOW, controller, job, node, snapshot

ME = pwd.getpwuid(os.getuid()).pw_name
UID = os.getuid()


def running(job_id=7, elapsed=600, limit=24 * 3600, user=ME):
    """An alexnet job at the proportional 3 cores per GPU (speed 1), opted in to requeue,
    on a node with room for 12 cores: the time limit alone says a requeue pays."""
    return job(job_id, state="RUNNING", priority=1, reason="None", cpus_per_gpu=3,
               mem_per_gpu_mb=62500, requeue=True, start_time=int(NOW) - elapsed,
               time_limit_s=limit, nodes=("n1",), user=user,
               alloc=(NodeAlloc("n1", cpus=3, mem_mb=62500, gpus=1),),
               comment="synergy:profile=alexnet synergy:requeue-ok", admin_comment="")


def round_of(tmp_path, profiles_path, j, history=(), **usage):
    snap = snapshot(j, nodes=[node(alloc_cpus=3, alloc_gpus=1, alloc_mem_mb=62500)])
    ctl, writer = controller(tmp_path, profiles_path, snap)
    if usage:
        ctl.cfg = replace(ctl.cfg, usage=replace(ctl.cfg.usage, **usage))
    ctl.state.note_runs([(100 + i, "alexnet", NOW - 9000, s) for i, s in enumerate(history)],
                        NOW - 3000)
    ctl.run_round()
    reasons = [r["reason"] for r in ctl.state.recent_actions() if r["action"] == "requeue"]
    return writer.calls, reasons


def progress(tmp_path, job_id, total, done, rate=10.0, steps=20):
    with Progress(path=str(tmp_path / f"{job_id}.progress"), total=total, done=done) as p:
        p._fh.write("".join(f"{1000 + i / rate:.3f} 1\n" for i in range(steps)))
        p.done += steps
    return tmp_path / f"{job_id}.progress"


def test_the_sources_in_order():
    j = running(elapsed=600, limit=3600)
    assert remaining(j, 600, Left(progress_s=50, typical_s=900, typical_jobs=4, speed=2)) \
        == (100, "its progress reports")
    # History: 900 s at proportional speed, 600 s run at 1.5x = 900 done: past it, so the
    # limit decides; at 1x, 300 s left.
    assert remaining(j, 600, Left(typical_s=900, typical_jobs=4, speed=1.5)) \
        == (3000, "its time limit")
    assert remaining(j, 600, Left(typical_s=900, typical_jobs=4)) \
        == (300, "the typical run of its key's last 4 jobs")
    assert remaining(j, 600, None) == (3000, "its time limit")
    assert remaining(running(limit=0), 600, None) == (UNKNOWN_REMAINING_S, "no time limit")


def test_the_progress_file_says_how_many_samples_are_left(tmp_path):
    path = progress(tmp_path, 5, total=1000, done=300, rate=10.0, steps=20)
    seen = read_steps(str(tmp_path), 5, UID)
    assert seen is not None and seen.left == 680
    assert progress_left_s(str(tmp_path), 5, UID) == pytest.approx(68.0, rel=0.01)
    # Without a total line nothing says how far the job goes.
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines()[1:]))
    assert progress_left_s(str(tmp_path), 5, UID) is None
    # A total but too few steps yet: how far, not yet how fast; no requeue is priced on
    # the limit meanwhile.
    progress(tmp_path, 8, total=1000, done=0, steps=3)
    assert progress_left_s(str(tmp_path), 8, UID) == math.inf
    assert remaining(running(), 600, Left(progress_s=math.inf))[0] == UNKNOWN_REMAINING_S
    # Someone else's file says nothing of the job.
    progress(tmp_path, 6, total=1000, done=0)
    assert progress_left_s(str(tmp_path), 6, UID + 1) is None


def test_a_restart_counts_its_own_speed_only(tmp_path):
    """Steps before a requeue and the restart's gap are not the new run's speed."""
    progress(tmp_path, 4, total=1000, done=0, rate=1.0, steps=20)      # slow first run
    path = tmp_path / "4.progress"
    with Progress(path=str(path), total=1000, done=20) as p:          # resumed, faster
        p._fh.write("".join(f"{2000 + i / 10:.3f} 1\n" for i in range(20)))
    assert progress_left_s(str(tmp_path), 4, UID) == pytest.approx(960 / 10, rel=0.01)


def test_a_long_run_repeats_its_total_so_the_files_end_still_says_it(tmp_path):
    path = tmp_path / "9.progress"
    with Progress(path=str(path), total=10 * TOTAL_EVERY + 5) as p:
        for _ in range(10 * TOTAL_EVERY):
            p.step(1)
    assert path.read_text().count("total ") == 11
    seen = read_steps(str(tmp_path), 9, UID)
    assert seen is not None and seen.left == 5


def test_the_time_limit_alone_says_a_requeue_pays(tmp_path, profiles_path):
    calls, reasons = round_of(tmp_path, profiles_path, running())
    assert calls == [("requeue", 7, Shape(12, 125000))]
    assert "by its time limit" in reasons[0] and "s left" in reasons[0]


def test_progress_that_says_the_job_nearly_ended_keeps_it_running(tmp_path, profiles_path):
    """The limit says 23 h left; the job's progress says 3 s: a restart (10 s) cannot pay."""
    progress(tmp_path, 7, total=1000, done=950, rate=10.0, steps=20)
    calls, reasons = round_of(tmp_path, profiles_path, running(), progress_dir=str(tmp_path))
    assert calls == [] and reasons == []


def test_progress_that_says_much_is_left_requeues_and_says_so(tmp_path, profiles_path):
    """The key's history says the job is nearly done; its own progress says 1000 s more:
    the progress decides."""
    progress(tmp_path, 7, total=100_000, done=0, rate=10.0, steps=20)
    calls, reasons = round_of(tmp_path, profiles_path, running(), history=(605, 605, 605),
                              progress_dir=str(tmp_path))
    assert calls == [("requeue", 7, Shape(12, 125000))]
    assert "by its progress reports" in reasons[0]


def test_the_keys_history_decides_where_there_is_no_progress(tmp_path, profiles_path):
    """Jobs of the key ran 605 s: one that ran 600 s has about 5 s left, whatever its
    limit; one whose key's jobs ran 2000 s has 1400 s left and is requeued."""
    calls, reasons = round_of(tmp_path, profiles_path, running(), history=(605, 600, 610))
    assert calls == [] and reasons == []
    calls, reasons = round_of(tmp_path / "b", profiles_path, running(),
                              history=(2000, 1900, 2100))
    assert calls == [("requeue", 7, Shape(12, 125000))]
    assert "1400 s left by the typical run of its key's last 3 jobs" in reasons[0]


def test_a_key_with_too_little_history_falls_back_to_the_limit(tmp_path, profiles_path):
    calls, reasons = round_of(tmp_path, profiles_path, running(), history=(605, 605))
    assert calls == [("requeue", 7, Shape(12, 125000))] and "time limit" in reasons[0]


def test_the_controller_keeps_how_long_each_keys_jobs_ran(tmp_path):
    st = StateStore(":memory:")
    st.note_runs([(1, "a", NOW, 100.0), (2, "a", NOW, 200.0), (3, "a", NOW, 300.0),
                  (4, "a", NOW, 50.0), (5, "b", NOW, 10.0)], NOW)
    # Job 4 is still running (live): not a finished run; job 3 was requeued: cut short.
    st.note_runs([], NOW + 1, requeued=[3])
    assert st.typical_runs(live=[4], least=2) == {"a": (150.0, 2)}
    assert st.typical_runs(live=[4]) == {}
