"""What each user may read of the controller's state (issue 43, item 9): the state and
the audit log are the controller's alone, and the views beside them give each user their
own jobs, every job only where Slurm's PrivateData shows every job (or to Slurm's
operators and admins). Runs as root, with system users as the job owners; a real user
runs ``synergy status`` through runuser."""

from __future__ import annotations

import json
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from synergy_slurm.controller.audit import AuditLog
from synergy_slurm.controller.state import StateStore
from synergy_slurm.controller.views import ALL, ROUND, USERS, read_view, write_views
from synergy_slurm.slurm.access import Access, jobs_private, parse_admins

ALICE, BOB, OPERATOR = "nobody", "daemon", "bin"      # users every Linux system has
EXE = Path(sys.executable).with_name("synergy")


def row(job_id: int, user: str) -> dict:
    return {"job_id": job_id, "user": user, "state": "PENDING", "profile_key": "alexnet",
            "gpus": 1, "cpus_per_gpu": 3, "mem_per_gpu_mb": 62500, "planned_cpus": 12,
            "planned_mem_mb": 125000, "speedup": 2.9, "how": "tune", "note": f"n{job_id}",
            "updated": 1.0}


@pytest.fixture
def state():
    """A state directory others may pass through (as /var/lib/synergy), with a round, two
    users' jobs and an action on each."""
    where = Path(tempfile.mkdtemp(prefix="synergy-views-"))
    where.chmod(0o755)
    store = StateStore(where / "state.db")
    rid = store.start_round("enforce")
    store.finish_round(rid, duration_s=0.1, managed=2, actions=2, errors=0)
    store.replace_jobs([row(1, ALICE), row(2, BOB)])
    for jid, user in ((1, ALICE), (2, BOB)):
        store.record_action(rid, {"job_id": jid, "action": "release", "before": None,
                                  "after": None, "reason": f"why {jid}"}, user, "done")
    yield store, where
    store.close()
    shutil.rmtree(where)


def test_the_state_and_the_audit_log_are_not_world_readable(state, tmp_path):
    _, where = state
    for p in where.iterdir():
        if p.name.startswith("state.db"):
            assert p.stat().st_mode & 0o077 == 0, (p, oct(p.stat().st_mode))
    log = AuditLog(tmp_path / "audit.jsonl")
    log.write(1, "enforce", {"job_id": 1, "action": "release", "before": None,
                             "after": None, "reason": "r"}, ALICE, "done")
    assert (tmp_path / "audit.jsonl").stat().st_mode & 0o777 == 0o640


def test_an_existing_world_readable_state_and_log_are_tightened(tmp_path):
    (tmp_path / "state.db").touch(mode=0o644)
    (tmp_path / "audit.jsonl").touch(mode=0o644)
    StateStore(tmp_path / "state.db").close()
    AuditLog(tmp_path / "audit.jsonl").write(1, "observe", {
        "job_id": 1, "action": "x", "before": None, "after": None, "reason": ""}, "u", "ok")
    assert (tmp_path / "state.db").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "audit.jsonl").stat().st_mode & 0o777 == 0o640


def test_where_jobs_are_private_each_user_gets_their_own_view(state):
    store, where = state
    view = where / "view"
    assert write_views(store, view, Access(True, frozenset({OPERATOR}))) == []
    assert (view / ALL).stat().st_mode & 0o777 == 0o600
    assert (view / ROUND).stat().st_mode & 0o777 == 0o644
    assert "jobs" not in json.loads((view / ROUND).read_text())
    mine = view / USERS / f"{ALICE}.json"
    assert mine.stat().st_uid == pwd.getpwnam(ALICE).pw_uid
    assert mine.stat().st_mode & 0o777 == 0o400
    seen = read_view(view, ALICE)
    assert [j["job_id"] for j in seen.jobs()] == [1]
    assert [a["reason"] for a in seen.actions_for(1)] == ["why 1"] and not seen.actions_for(2)
    assert [j["job_id"] for j in read_view(view, OPERATOR).jobs()] == [1, 2]


def test_where_jobs_are_public_every_user_sees_every_job(state):
    store, where = state
    view = where / "view"
    write_views(store, view, Access(False, frozenset()))
    assert (view / ALL).stat().st_mode & 0o777 == 0o644 and not (view / USERS).exists()
    assert [j["job_id"] for j in read_view(view, "someone").jobs()] == [1, 2]


def status_as(user: str, where: Path, *args: str) -> subprocess.CompletedProcess:
    cfg = where / "synergy.toml"
    cfg.write_text(f'[controller]\nstate_db = "{where}/state.db"\n')
    cfg.chmod(0o644)
    return subprocess.run(["runuser", "-u", user, "--", str(EXE), "status", "--config",
                           str(cfg), "--format", "json", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def test_a_user_running_status_sees_only_their_own_jobs(state):
    """Before: state.db 0644 and status read it whole, so any user saw every user's jobs
    and notes; now the user reads their own view."""
    store, where = state
    write_views(store, where / "view", Access(True, frozenset()))
    res = status_as(ALICE, where)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [j["job_id"] for j in doc["jobs"]] == [1] and doc["last_round"]["managed"] == 2
    res = status_as(ALICE, where, "--job", "2")
    assert json.loads(res.stdout)["jobs"] == []
    nobody_else = status_as("sys", where)                 # no job, no view of their own
    assert nobody_else.returncode == 0, nobody_else.stderr
    assert json.loads(nobody_else.stdout)["jobs"] == []


def test_slurms_rule_is_read_from_privatedata_and_admin_levels():
    assert jobs_private("PrivateData             = jobs,usage\n")
    assert not jobs_private("PrivateData             = none\n")
    assert parse_admins("root|Administrator\nalice|None\nop|Operator\n") == {"root", "op"}
