"""``synergy status`` for any job, any time (issue 45, item 3): a job that left the queue
keeps its history in the state (and in its user's view, under the views' privacy rule);
a controller whose last round is far older than its interval is named as possibly down;
and ``status`` writes nothing, not even SQLite's WAL files when root runs it.

Before: a finished job said "not managed ... see the audit log" (which users cannot
read); a round 417 s old on a 2-s interval was shown without a word; root's status left
``state.db-wal`` and ``state.db-shm`` in the state directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from synergy_slurm.controller.state import StateStore
from synergy_slurm.controller.status import explain_job, status_lines
from synergy_slurm.controller.views import read_view, write_views
from synergy_slurm.slurm.access import Access

from .test_views import ALICE, BOB, row

ROOT = Path(__file__).resolve().parents[2]


def one_round(store: StateStore, rows: list[dict], interval: float = 2.0) -> int:
    rid = store.start_round("enforce", interval_s=interval, config_loaded=time.time() - 60,
                            config_path="/etc/slurm/synergy.toml")
    store.finish_round(rid, duration_s=0.1, managed=len(rows), actions=0, errors=0)
    store.replace_jobs(rows)
    return rid


@pytest.fixture
def state():
    """Job 1 (alice's) reshaped, requeued, then gone from the queue; job 2 (bob's) too."""
    where = Path(tempfile.mkdtemp(prefix="synergy-status-"))
    where.chmod(0o755)
    store = StateStore(where / "state.db")
    rid = one_round(store, [dict(row(1, ALICE), state="RUNNING"), row(2, BOB)])
    for jid, user, kind in ((1, ALICE, "requeue"), (2, BOB, "reshape")):
        store.record_action(rid, {"job_id": jid, "action": kind, "before": None,
                                  "after": {"cpus_per_gpu": 12, "mem_per_gpu_mb": 125000},
                                  "reason": f"why {jid}"}, user, "done")
    store.note_requeue(1, time.time())
    one_round(store, [dict(row(1, ALICE), state="RUNNING")])
    one_round(store, [])                  # both finished
    yield store, where
    store.close()
    shutil.rmtree(where)


def test_a_finished_jobs_history_is_kept_in_the_state(state):
    store, _ = state
    assert store.jobs() == []
    lines = explain_job(store, 1)
    text = "\n".join(lines)
    assert "not managed by synergy" not in text and "audit log" not in text
    assert f"job 1 ({ALICE}): left the queue" in text and "last seen RUNNING" in text
    assert "requeue - -> 12c/125000MB (why 1) [done]" in text and "requeued once" in text
    assert "profile: alexnet" in text
    assert "reshape" in "\n".join(explain_job(store, 2))


def test_a_user_sees_their_own_finished_jobs_history_and_no_one_elses(state):
    store, where = state
    write_views(store, where / "view", Access(True, frozenset()))
    mine = read_view(where / "view", ALICE)
    assert [j["job_id"] for j in mine.past()] == [1]
    assert "requeue" in "\n".join(explain_job(mine, 1))
    theirs = "\n".join(explain_job(mine, 2))
    assert "reshape -" not in theirs and "why 2" not in theirs
    assert "not managed by synergy in the last 7 days, or not yours to see" in theirs


def status_as(user: str, where: Path, *args: str) -> subprocess.CompletedProcess:
    cfg = where / "synergy.toml"
    cfg.write_text(f'[controller]\nstate_db = "{where}/state.db"\n')
    cfg.chmod(0o644)
    return subprocess.run(["runuser", "-u", user, "--", "env", f"PYTHONPATH={ROOT}",
                           sys.executable, "-m", "synergy_slurm", "status", "--config",
                           str(cfg), *args], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs status as another user (runuser)")
def test_a_user_runs_status_on_their_finished_job(state):
    store, where = state
    write_views(store, where / "view", Access(True, frozenset()))
    res = status_as(ALICE, where, "--job", "1")
    assert res.returncode == 0, res.stderr
    assert "left the queue" in res.stdout and "requeue" in res.stdout
    res = status_as(ALICE, where, "--job", "2", "--format", "json")
    assert json.loads(res.stdout)["past"] == []
    res = status_as(BOB, where, "--job", "2", "--format", "json")
    assert [j["job_id"] for j in json.loads(res.stdout)["past"]] == [2]


def test_a_stale_controller_is_named(tmp_path):
    store = StateStore(tmp_path / "state.db")
    one_round(store, [row(1, ALICE)], interval=2.0)
    started = store.last_round()["started"]
    lines = status_lines(store, now=started + 417)
    assert lines[1].startswith("warning: no round for 417 s on a 2-s interval: the "
                               "controller may be down")
    assert not any("may be down" in x for x in status_lines(store, now=started + 5))
    assert "may be down" in explain_job(store, 1, now=started + 417)[1]


def test_status_run_as_root_writes_nothing_in_the_state_directory(tmp_path):
    store = StateStore(tmp_path / "state.db")
    one_round(store, [row(1, ALICE)])
    store.close()                          # the controller stopped: its WAL files went
    (tmp_path / "synergy.toml").write_text(f'[controller]\nstate_db = '
                                           f'"{tmp_path}/state.db"\n')
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in ([], ["--job", "1"], ["--format", "json"]):
        res = subprocess.run([sys.executable, "-m", "synergy_slurm", "status", "--config",
                              str(tmp_path / "synergy.toml"), *args], capture_output=True,
                             text=True, timeout=60, check=False,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert res.returncode == 0, res.stderr
        assert "1 managed" in res.stdout or "job_id" in res.stdout or "job 1" in res.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == before == ["state.db",
                                                                     "synergy.toml"]
