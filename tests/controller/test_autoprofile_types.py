"""Automatic profiling per GPU type: a key is profiled on the type its job runs on, and a
profile of another type does not make the key known there."""

from __future__ import annotations

import getpass
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.autoprofile import AutoProfiler
from synergy_slurm.controller.state import StateStore
from synergy_slurm.slurm.model import SlurmJob, Snapshot

USER = getpass.getuser()


class RecordingWriter:
    """Just what the profiler submits with: the script it copies, the sbatch it sends."""

    def __init__(self) -> None:
        self.submitted: list[list[str]] = []

    def batch_script(self, job_id: int) -> str:
        return "#!/bin/sh\ntrue\n"

    def submit_as(self, user, gid, args, script, run) -> int:
        self.submitted.append(list(args))
        return 900 + len(self.submitted)


def job(job_id: int, gpu_type: str | None = None) -> SlurmJob:
    return SlurmJob(job_id, user=USER, state="PENDING", partition="all", gpus=2,
                    gpus_per_job=2, priority=1, reason="Priority", submit_time=0,
                    comment="synergy:profile=k", gpu_type=gpu_type)


@pytest.fixture
def spool():
    """Under /tmp: the profiling job's user must be able to reach it (pytest's tmp_path
    is private)."""
    top = Path(tempfile.mkdtemp(prefix="synergy-spool-"))
    top.chmod(0o755)
    yield top / "spool"
    shutil.rmtree(top)


def profiler(spool: Path, mode: str) -> tuple[AutoProfiler, RecordingWriter]:
    cfg = config_from_dict({"profiling": {"auto": True, "spool": str(spool),
                                          "max_cpus_per_gpu": 8}})
    writer = RecordingWriter()
    return AutoProfiler(cfg, writer, StateStore(":memory:"), mode), writer


def types_of(j: SlurmJob) -> frozenset[str]:
    return frozenset({j.gpu_type}) if j.gpu_type else frozenset({"a100", "h100"})


def test_each_type_is_profiled_on_its_own_nodes(paper_profiles, spool):
    ap, writer = profiler(spool, "enforce")
    on_a100 = replace(paper_profiles["shufflenet"], key="k", gpu_type="a100")
    jobs = [job(1, "a100"), job(2, "h100"), job(3)]
    events = ap.round(Snapshot((), (), (), "26.05.5"), jobs, {on_a100.slot: on_a100},
                      types_of, now=100.0)
    by_job = {e.for_job: e for e in events}
    assert 1 not in by_job                                  # known on its type
    assert (by_job[2].key, by_job[2].what) == ("k@h100", "submitted"), by_job[2]
    assert "--gpus=h100:2" in writer.submitted[0] and len(writer.submitted) == 1
    assert by_job[3].what == "error" and "a100, h100" in by_job[3].detail
    # The next round submits nothing again: one profiling job per key and type.
    again = ap.round(Snapshot((), (), (), "26.05.5"), jobs, {on_a100.slot: on_a100},
                     types_of, now=200.0)
    assert [e for e in again if e.what in ("submitted", "error")] == []


def test_a_stale_profile_is_profiled_again_once(paper_profiles, spool):
    """The closed loop found k@a100 (measured for the job's user) far off a job's
    progress: its key is profiled again on that type (the old profile serves meanwhile),
    once per retry_after_s. A stale site-wide or other user's profile is not the user's
    to replace: not profiled again for them."""
    ap, writer = profiler(spool, "enforce")
    on_a100 = replace(paper_profiles["shufflenet"], key="k", gpu_type="a100")
    known = {on_a100.slot: on_a100}
    snap = Snapshot((), (), (), "26.05.5")
    assert ap.round(snap, [job(1, "a100")], known, types_of, now=100.0) == []
    for owners in ({}, {"k@a100": "someone-else"}):
        assert ap.round(snap, [job(1, "a100")], known, types_of, now=200.0,
                        stale=frozenset({"k@a100"}), owners=owners) == []
    events = ap.round(snap, [job(1, "a100")], known, types_of, now=200.0,
                      stale=frozenset({"k@a100"}), owners={"k@a100": USER})
    assert [(e.key, e.what) for e in events] == [("k@a100", "submitted")]
    assert "--gpus=a100:2" in writer.submitted[0]
    ap.state.note_profiling("k@a100", status="stored", finished=300.0)
    again = ap.round(snap, [job(1, "a100")], known, types_of, now=400.0,
                     stale=frozenset({"k@a100"}), owners={"k@a100": USER})
    assert [e for e in again if e.what == "submitted"] == []   # within retry_after_s


def test_the_profiling_job_gets_a_clean_environment(paper_profiles, spool, monkeypatch):
    """Issue 43, item 10: the profiling job runs the user's script; submitted with
    sbatch's default --export=ALL it inherited the controller's (root's) environment.
    Now --export=NIL, and the runner sets what the job needs from the user's passwd
    entry, nothing from the controller's environment."""
    import pwd

    monkeypatch.setenv("SYNERGY_T_CONTROLLER_ONLY", "leaked")
    ap, writer = profiler(spool, "enforce")
    [ev] = ap.round(Snapshot((), (), (), "26.05.5"), [job(1, "a100")], {}, types_of,
                    now=100.0)
    assert ev.what == "submitted" and "--export=NIL" in writer.submitted[0]
    runner = (spool / "k-a100-1" / "run.sh").read_text()
    pw = pwd.getpwnam(USER)
    assert f"HOME={pw.pw_dir}" in runner and f"USER={pw.pw_name}" in runner
    assert "SYNERGY_T_CONTROLLER_ONLY" not in runner and 'exec "$@"' in runner
