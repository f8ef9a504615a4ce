"""Issue 43, items 1, 2 and 4: a hostile user against the controller's automatic profiling
and progress reading, through a whole round on the shipped fake Slurm.

The controller (root at a site) reads a profiling job's result from a spool directory the
job's user owns, and jobs' progress from a directory everyone writes (1777). The user
leaves there what they like: links to root's files, a FIFO, /dev/zero, a sparse file of
64 GB, a well-formed result for a key that is site-wide or another user's, a progress file
named after another user's job. The round must finish in seconds, read none of root's
files into anything other users see (state notes: `synergy status`; the audit log), and
change no other user's profile.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import pwd
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.audit import AuditLog
from synergy_slurm.controller.autoprofile import below_measured
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.controller.state import StateStore
from synergy_slurm.core import profiles_to_doc
from synergy_slurm.profiles.build import build_profile
from synergy_slurm.profiles.store import RESULT_META, ProfileStore
from synergy_slurm.slurm.fake import FakeReader, FakeWriter
from synergy_slurm.slurm.model import NodeAlloc, SlurmJob, SlurmNode, SlurmPartition, Snapshot
from synergy_slurm.slurm.sstat import JobUse

NOW = 1_800_000_000.0
ME = getpass.getuser()          # the attacker: whoever runs the tests
VICTIM = "nobody"               # another user of this host
PASSWD_LINE = Path("/etc/passwd").read_text().splitlines()[0]


def result(key: str, curve: dict[int, float]) -> dict:
    prof = build_profile(key, curve)
    return {**profiles_to_doc({key: prof}),
            RESULT_META: {"measured_points": len(curve), "profiling_cpu_s": 1.0}}


def running(job_id: int, user: str, key: str) -> SlurmJob:
    return SlurmJob(job_id, user=user, state="RUNNING", partition="gpu", gpus=1,
                    gpus_per_job=1, priority=1, reason="None", submit_time=int(NOW) - 900,
                    start_time=int(NOW) - 600, cpus_per_gpu=3, mem_per_gpu_mb=62500,
                    comment=f"synergy:profile={key}",
                    admin_comment=f"synergy.managed=1,synergy.profile={key}",
                    nodes=("n1",), alloc=(NodeAlloc("n1", 3, 62500, 1),))


def hostile_spools(top: Path) -> dict[str, Path]:
    """One spool per trick, as the attacker leaves them once their profiling job ended."""
    spools = {}
    for name in ("sym-k", "fifo-k", "zero-k", "huge-k", "noresult-k", "fifo-out-k",
                 "gnmt", "victimkey"):
        spools[name] = top / f"{name}-1"
        spools[name].mkdir(parents=True)
    os.symlink("/etc/passwd", spools["sym-k"] / "profile.json")
    os.symlink("/etc/passwd", spools["sym-k"] / "slurm.out")
    os.mkfifo(spools["fifo-k"] / "profile.json")
    os.symlink("/dev/zero", spools["zero-k"] / "profile.json")
    with open(spools["huge-k"] / "profile.json", "wb") as fh:
        fh.truncate(64 << 30)                             # sparse: 64 GB, no disk used
    os.symlink("/etc/passwd", spools["noresult-k"] / "slurm.out")
    os.mkfifo(spools["fifo-out-k"] / "slurm.out")
    # Well-formed results for a site-wide key and the victim's: flat, to win 1 core.
    flat = {1: 5000.0, 3: 5000.0, 12: 5000.0}
    for key in ("gnmt", "victimkey"):
        (spools[key] / "profile.json").write_text(json.dumps(result(key, flat)))
    return spools


def store_rows(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as con:
        return sorted(con.execute("SELECT key, doc, owner, source FROM profiles"))


@pytest.fixture
def hostile(tmp_path, paper_profiles):
    """A controller with automatic profiling and progress on, the attacker's ended
    profiling jobs, and a victim's running job whose progress file the attacker wrote."""
    store = tmp_path / "p.db"
    st = ProfileStore(store)
    st.put(paper_profiles["gnmt"], source="import")                          # site-wide
    st.put(build_profile("victimkey", {1: 1000.0, 3: 1000.0, 12: 1000.0}),
           measured_points=3, source="auto", owner=VICTIM)                   # the victim's
    progress = tmp_path / "progress"
    progress.mkdir()
    progress.chmod(0o1777)
    # The victim's job 50 runs at 1000 samples/s as its profile says; the attacker writes
    # its progress file first, at a tenth of that (to make the profile look stale).
    (progress / "50.progress").write_text("".join(f"{NOW + i} 100\n" for i in range(20)))
    doc = {"hook": {"dir": str(tmp_path), "state_dir": str(tmp_path)},
           "profiles": {"store": str(store)},
           "controller": {"mode": "enforce", "state_db": str(tmp_path / "state.db"),
                          "audit_log": str(tmp_path / "audit.jsonl")},
           "profiling": {"auto": True, "spool": str(tmp_path / "spool")},
           "usage": {"every_rounds": 1, "progress_dir": str(progress)}}
    snap = Snapshot((running(50, VICTIM, "victimkey"),),
                    (SlurmNode("n1", cpus=24, mem_mb=500_000, gpus=8, alloc_cpus=3,
                               alloc_gpus=1, alloc_mem_mb=62500, state="mixed",
                               partitions=("gpu",)),),
                    (SlurmPartition("gpu", ("n1",), 3, 62500, True),), "22.05.8")
    reader = FakeReader(snap)
    reader.used = {50: JobUse("50", cpu_s=1800.0, peak_mem_mb=4000.0)}
    state = StateStore(":memory:")
    ctl = Controller(config_from_dict(doc), clock=lambda: NOW, reader=reader,
                     writer=FakeWriter(), state=state, audit=AuditLog(tmp_path / "audit.jsonl"))
    spools = hostile_spools(tmp_path / "spool")
    for i, (key, spool) in enumerate(spools.items()):
        state.note_profiling(key, user=ME, for_job=1, slurm_job=700 + i, status="submitted",
                             submitted=NOW - 300, spool=str(spool))
    yield ctl, spools, store
    for name in ("fifo-k", "fifo-out-k"):       # free a round the old code left blocked
        fifo = spools[name] / ("profile.json" if name == "fifo-k" else "slurm.out")
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_hostile_profiling_job_neither_stalls_nor_leaks_nor_plants(hostile, tmp_path):
    ctl, spools, store = hostile
    before = store_rows(store)
    done: list[object] = []
    t0 = time.monotonic()
    runner = threading.Thread(target=lambda: done.append(ctl.run_round()), daemon=True)
    runner.start()
    runner.join(timeout=30)
    took = time.monotonic() - t0
    print(f"\nhostile round: {took:.3f} s")
    assert done and took < 5.0, f"the round did not finish in 5 s ({took:.1f} s)"
    # Every trick failed, each with a reason.
    records = ctl.state.profiling()
    assert {k: r["status"] for k, r in records.items() if k in spools} == \
        dict.fromkeys(spools, "failed")
    assert "a link" in records["sym-k"]["note"] and "a link" in records["zero-k"]["note"]
    assert "not a regular file" in records["fifo-k"]["note"]
    assert "more than the" in records["huge-k"]["note"]
    assert "site-wide" in records["gnmt"]["note"]
    assert "another user" in records["victimkey"]["note"]
    assert "slurm.out" in records["noresult-k"]["note"]
    # No line of root's files in what every user can read.
    audit = (tmp_path / "audit.jsonl").read_text()
    notes = json.dumps(records)
    for text in (audit, notes):
        assert PASSWD_LINE not in text and "/bin/" not in text
    # No other user's profile changed, none of the attacker's stored.
    assert store_rows(store) == before
    # The forged progress file was not taken as the victim's: no throughput, not stale.
    [row] = [r for r in ctl.state.usage() if r["job_id"] == 50]
    assert row["throughput"] is None
    assert not any(json.loads(x)["action"] == "stale-profile" for x in audit.splitlines())


def test_a_profile_below_the_measured_proportional_speed_is_refused(tmp_path):
    """Item 2: the allocators keep "never below proportional" in the profile's numbers;
    the user's jobs of the key were measured at 1000 samples/s at their proportional
    share (3 cores, 62.5 GB), so a result that says 300 there (and a flat 300 everywhere,
    to win 1 core) is refused; one that agrees within 10% is stored as the user's own."""
    rows = [{"job_id": 9, "key": "k", "user": ME, "granted_cpus": 3, "granted_mem_gb": 62.5,
             "fair_cpus": 3, "fair_mem_gb": 62.5, "throughput": 1000.0},
            {"job_id": 10, "key": "k", "user": ME, "granted_cpus": 12,
             "granted_mem_gb": 125.0, "fair_cpus": 3, "fair_mem_gb": 62.5,
             "throughput": 3000.0}]                        # given more: not proportional
    flat = build_profile("k", {1: 300.0, 3: 300.0, 12: 300.0})
    honest = build_profile("k", {1: 400.0, 3: 950.0, 12: 2900.0})
    assert "refused" in below_measured(flat, rows, ME)
    assert below_measured(honest, rows, ME) is None
    assert below_measured(flat, rows, "someone-else") is None       # nothing measured
    # Through the controller's import: refused, stored nothing; the honest one is stored.
    spool = tmp_path / "spool" / "k-1"
    spool.mkdir(parents=True)
    state = StateStore(":memory:")
    state.note_usage([{**r, "used_cpus": 1.0, "peak_mem_gb": 1.0, "observed_s": 600.0,
                       "at": time.time(), "predicted": None, "slot": None} for r in rows])
    doc = {"profiles": {"store": str(tmp_path / "p.db")},
           "profiling": {"auto": True, "spool": str(tmp_path / "spool")},
           "controller": {"mode": "enforce"}}
    from synergy_slurm.controller.autoprofile import AutoProfiler

    ap = AutoProfiler(config_from_dict(doc), FakeWriter(), state, "enforce")
    for curve, want in (({1: 300.0, 3: 300.0, 12: 300.0}, "failed"),
                        ({1: 400.0, 3: 950.0, 12: 2900.0}, "stored")):
        (spool / "profile.json").write_text(json.dumps(result("k", curve)))
        state.note_profiling("k", user=ME, for_job=9, slurm_job=77, status="submitted",
                             submitted=NOW, spool=str(spool))
        [ev] = ap.round(Snapshot((), (), (), "22.05.8"), [], {}, lambda j: frozenset({""}),
                        NOW)
        assert ev.what == want, ev
    got = ProfileStore(tmp_path / "p.db", readonly=True).get("k")
    assert got is not None and got.owner == ME and got.profile.throughput[1][0] == 950.0


def test_a_result_someone_else_owns_is_not_read(tmp_path):
    """Item 1: the result must be the job's user's own regular file: one another user put
    in the spool (or a hard link to root's file) is refused. Needs root to give a file
    away."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a file of another user")
    spool = tmp_path / "spool" / "k-1"
    spool.mkdir(parents=True)
    (spool / "profile.json").write_text(json.dumps(result("k", {1: 1.0, 3: 2.0})))
    nobody = pwd.getpwnam(VICTIM)
    os.chown(spool / "profile.json", nobody.pw_uid, nobody.pw_gid)
    state = StateStore(":memory:")
    state.note_profiling("k", user=ME, for_job=9, slurm_job=77, status="submitted",
                         submitted=NOW, spool=str(spool))
    doc = {"profiles": {"store": str(tmp_path / "p.db")},
           "profiling": {"auto": True, "spool": str(tmp_path / "spool")}}
    from synergy_slurm.controller.autoprofile import AutoProfiler

    ap = AutoProfiler(config_from_dict(doc), FakeWriter(), state, "enforce")
    [ev] = ap.round(Snapshot((), (), (), "22.05.8"), [], {}, lambda j: frozenset({""}), NOW)
    assert ev.what == "failed" and "not the job's user" in ev.detail
    assert replace(ev, detail="").key == "k"
