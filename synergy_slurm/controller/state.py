"""The controller's state in SQLite (WAL): rounds, actions, per-job plan and history.

Nothing here is needed to be correct after a restart (every round is planned afresh from
Slurm); it is what ``synergy status`` shows, the audit trail's index, and the memory of
when a job was last requeued.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..dbfile import DatabaseError, connect, has_table

SCHEMA = """
CREATE TABLE IF NOT EXISTS rounds (
  id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL, duration_s REAL, mode TEXT,
  jobs INTEGER, managed INTEGER, actions INTEGER, errors INTEGER,
  planned_speedup REAL, proportional_speedup REAL, error TEXT, interval_s REAL,
  config_loaded REAL, config_path TEXT);
CREATE TABLE IF NOT EXISTS actions (
  round INTEGER, ts REAL, job_id INTEGER, user TEXT, action TEXT, before TEXT, after TEXT,
  reason TEXT, result TEXT);
CREATE INDEX IF NOT EXISTS actions_job ON actions(job_id);
CREATE TABLE IF NOT EXISTS jobs (
  job_id INTEGER PRIMARY KEY, user TEXT, state TEXT, profile_key TEXT, gpus INTEGER,
  cpus_per_gpu INTEGER, mem_per_gpu_mb INTEGER, planned_cpus INTEGER,
  planned_mem_mb INTEGER, speedup REAL, how TEXT, note TEXT, updated REAL,
  last_requeue REAL, requeues INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS profiling (
  key TEXT PRIMARY KEY, user TEXT, for_job INTEGER, slurm_job INTEGER, status TEXT,
  submitted REAL, finished REAL, cpu_s REAL, spool TEXT, note TEXT);
CREATE TABLE IF NOT EXISTS usage (
  job_id INTEGER PRIMARY KEY, key TEXT, user TEXT, granted_cpus INTEGER,
  granted_mem_gb REAL, fair_cpus INTEGER, fair_mem_gb REAL, used_cpus REAL,
  peak_mem_gb REAL, observed_s REAL, at REAL, throughput REAL, predicted REAL,
  slot TEXT, could_cpus REAL);
CREATE INDEX IF NOT EXISTS usage_key ON usage(key, user);
CREATE TABLE IF NOT EXISTS past_jobs (
  job_id INTEGER PRIMARY KEY, user TEXT, state TEXT, profile_key TEXT, gpus INTEGER,
  cpus_per_gpu INTEGER, mem_per_gpu_mb INTEGER, planned_cpus INTEGER,
  planned_mem_mb INTEGER, speedup REAL, how TEXT, note TEXT, updated REAL,
  requeues INTEGER, gone REAL);
CREATE TABLE IF NOT EXISTS runs (
  job_id INTEGER PRIMARY KEY, key TEXT, started REAL, seen REAL, prop_s REAL);
CREATE INDEX IF NOT EXISTS runs_key ON runs(key, seen);
CREATE TABLE IF NOT EXISTS notices (
  name TEXT PRIMARY KEY, since REAL, text TEXT);
CREATE TABLE IF NOT EXISTS suspects (
  key TEXT, user TEXT, status TEXT, since REAL, cap_cpus INTEGER, cap_mem_gb REAL,
  jobs INTEGER, cpu_use REAL, mem_use REAL, note TEXT, PRIMARY KEY (key, user));
"""


def _private(path: Path) -> None:
    """The state file and its WAL files readable by the controller alone (0600): they hold
    every user's jobs, keys and notes; users read their own through the views
    (``controller/views.py``). SQLite gives its WAL files the database's mode, so the
    file is made (or tightened) before it is opened."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if p.stat().st_mode & 0o077:
                p.chmod(0o600)
        except FileNotFoundError:
            pass


# How long the closed loop keeps a job's last use as evidence.
USAGE_KEEP_S = 30 * 86400.0
# How long a job that left the queue (finished, cancelled) keeps its last row, for
# `synergy status --job` after the fact.
PAST_KEEP_S = 7 * 86400.0
# Columns added to a table after its first release: (table, column, type), added to a
# state made by an older controller when it opens it for writing.
ADDED_COLUMNS = (("rounds", "interval_s", "REAL"), ("rounds", "config_loaded", "REAL"),
                 ("rounds", "config_path", "TEXT"), ("usage", "could_cpus", "REAL"))
_JOB_COLUMNS = ("job_id, user, state, profile_key, gpus, cpus_per_gpu, mem_per_gpu_mb, "
                "planned_cpus, planned_mem_mb, speedup, how, note, updated, requeues")
# Finished runs kept per key: the typical duration of its recent jobs.
RUNS_KEPT_PER_KEY = 50


class StateStore:
    def __init__(self, path: str | Path, readonly: bool = False) -> None:
        """The controller opens it for writing (one controller, from whichever thread runs
        its loop); ``synergy status`` read-only, as any user who may read the file."""
        self.path = Path(path)
        self.readonly = readonly
        if not readonly and str(path) != ":memory:":
            _private(self.path)
        self.db = connect(path, readonly=readonly)
        try:
            if readonly:
                missing = [t for t in ("rounds", "jobs", "profiling")
                           if not has_table(self.db, t)]
                if missing:
                    raise DatabaseError(f"{self.path}: not a synergy controller state "
                                        f"(no table {', '.join(missing)})")
            else:
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.executescript(SCHEMA)
                self._add_columns()
        except sqlite3.Error as exc:
            raise DatabaseError(f"{self.path}: {exc}") from None

    def _add_columns(self) -> None:
        """Columns later versions added to a table an earlier one created."""
        for table, column, kind in ADDED_COLUMNS:
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self.db.close()

    def start_round(self, mode: str, **fields: Any) -> int:
        """A round begins; ``fields``: the configuration it runs under (``interval_s``,
        ``config_loaded``, ``config_path``), which status compares the round's age with."""
        cols = ", ".join(["started", "mode", *fields])
        marks = ", ".join("?" * (2 + len(fields)))
        cur = self.db.execute(f"INSERT INTO rounds ({cols}) VALUES ({marks})",
                              (time.time(), mode, *fields.values()))
        return int(cur.lastrowid or 0)

    def finish_round(self, round_id: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE rounds SET {cols} WHERE id = ?",
                        (*fields.values(), round_id))

    def record_action(self, round_id: int, action: dict[str, Any], user: str, result: str) -> None:
        self.db.execute(
            "INSERT INTO actions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (round_id, time.time(), action["job_id"], user, action["action"],
             json.dumps(action["before"]), json.dumps(action["after"]), action["reason"],
             result))

    def note_requeue(self, job_id: int, when: float) -> None:
        self.db.execute("INSERT INTO jobs (job_id, last_requeue, requeues) VALUES (?, ?, 1) "
                        "ON CONFLICT(job_id) DO UPDATE SET last_requeue = excluded."
                        "last_requeue, requeues = requeues + 1", (job_id, when))

    def last_requeues(self) -> dict[int, float]:
        return {r[0]: r[1] for r in self.db.execute(
            "SELECT job_id, last_requeue FROM jobs WHERE last_requeue IS NOT NULL")}

    def replace_jobs(self, rows: Iterable[dict[str, Any]]) -> None:
        """The managed jobs as of this round (jobs gone from Slurm are dropped)."""
        rows = list(rows)
        self.db.execute("BEGIN")
        try:
            keep = [r["job_id"] for r in rows]
            self.db.execute("CREATE TEMP TABLE IF NOT EXISTS keep (id INTEGER PRIMARY KEY)")
            self.db.execute("DELETE FROM keep")
            self.db.executemany("INSERT INTO keep VALUES (?)", [(k,) for k in keep])
            # Jobs that left the queue keep their last row a while (status --job after
            # the fact, for their users too, through the views).
            now = time.time()
            self.db.execute(f"INSERT OR REPLACE INTO past_jobs ({_JOB_COLUMNS}, gone) "
                            f"SELECT {_JOB_COLUMNS}, ? FROM jobs WHERE state IS NOT NULL "
                            "AND job_id NOT IN (SELECT id FROM keep)", (now,))
            self.db.execute("DELETE FROM past_jobs WHERE gone < ? OR job_id IN "
                            "(SELECT id FROM keep)", (now - PAST_KEEP_S,))
            self.db.execute("DELETE FROM jobs WHERE job_id NOT IN (SELECT id FROM keep)")
            for r in rows:
                self.db.execute(
                    "INSERT INTO jobs (job_id, user, state, profile_key, gpus, cpus_per_gpu, "
                    "mem_per_gpu_mb, planned_cpus, planned_mem_mb, speedup, how, note, updated)"
                    " VALUES (:job_id, :user, :state, :profile_key, :gpus, :cpus_per_gpu, "
                    ":mem_per_gpu_mb, :planned_cpus, :planned_mem_mb, :speedup, :how, :note, "
                    ":updated) ON CONFLICT(job_id) DO UPDATE SET user=excluded.user, "
                    "state=excluded.state, profile_key=excluded.profile_key, "
                    "gpus=excluded.gpus, cpus_per_gpu=excluded.cpus_per_gpu, "
                    "mem_per_gpu_mb=excluded.mem_per_gpu_mb, "
                    "planned_cpus=excluded.planned_cpus, "
                    "planned_mem_mb=excluded.planned_mem_mb, speedup=excluded.speedup, "
                    "how=excluded.how, note=excluded.note, updated=excluded.updated", r)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def jobs(self) -> list[dict[str, Any]]:
        cur = self.db.execute("SELECT * FROM jobs WHERE state IS NOT NULL ORDER BY job_id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur]

    def past(self) -> list[dict[str, Any]]:
        """Jobs that left the queue in the last ``PAST_KEEP_S`` (finished, cancelled), as
        the last round that saw them had them, with ``gone``: when they were missed."""
        if not has_table(self.db, "past_jobs"):      # a state an older controller wrote
            return []
        cur = self.db.execute("SELECT * FROM past_jobs ORDER BY job_id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur]

    def actions_for(self, job_id: int, limit: int = 5) -> list[dict[str, Any]]:
        """The last actions recorded for a job, oldest first."""
        cur = self.db.execute("SELECT * FROM actions WHERE job_id = ? ORDER BY ts DESC "
                              "LIMIT ?", (job_id, limit))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur][::-1]

    def recent_actions(self, per_job: int = 5) -> list[dict[str, Any]]:
        """The last ``per_job`` actions of every job in the jobs table, oldest first (one
        query: what the status views hold)."""
        # Ordered by job, newest first, and cut in Python: measured twice as fast as
        # SQLite's window function here (benchmarks/status_views.py).
        cur = self.db.execute(
            "SELECT round, ts, job_id, user, action, before, after, reason, result FROM "
            "actions WHERE job_id IN (SELECT job_id FROM jobs WHERE state IS NOT NULL) "
            + ("OR job_id IN (SELECT job_id FROM past_jobs) "
               if has_table(self.db, "past_jobs") else "")
            + "ORDER BY job_id, ts DESC")
        names = [d[0] for d in cur.description]
        out: list[dict[str, Any]] = []
        last, n = None, 0
        for row in cur:
            n = n + 1 if row[2] == last else 1
            last = row[2]
            if n <= per_job:
                out.append(dict(zip(names, row, strict=True)))
        return sorted(out, key=lambda a: a["ts"])

    def last_round(self) -> dict[str, Any] | None:
        """The last finished round, failed or not (a failed one has ``error`` set)."""
        cur = self.db.execute("SELECT * FROM rounds WHERE duration_s IS NOT NULL "
                              "ORDER BY id DESC LIMIT 1")
        row = cur.fetchone()
        if row is None:
            return None
        return dict(zip([d[0] for d in cur.description], row, strict=True))

    # -- notices: what the controller found wrong outside itself, for `synergy status` ---
    def set_notice(self, name: str, text: str | None, since: float = 0.0) -> None:
        """Keep (or, with None, clear) the notice ``name``; a kept one keeps its start."""
        if text is None:
            self.db.execute("DELETE FROM notices WHERE name = ?", (name,))
            return
        self.db.execute("INSERT INTO notices VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE "
                        "SET text = excluded.text", (name, since, text))

    def notices(self) -> list[dict[str, Any]]:
        """The notices in force, oldest first (none from a store older than them)."""
        if not has_table(self.db, "notices"):
            return []
        cur = self.db.execute("SELECT name, since, text FROM notices ORDER BY since, name")
        return [{"name": n, "since": t, "text": x} for n, t, x in cur.fetchall()]

    # -- profiling jobs (controller/autoprofile.py) ---------------------------------------
    PROFILING_FIELDS = ("user", "for_job", "slurm_job", "status", "submitted", "finished",
                        "cpu_s", "spool", "note")

    def note_profiling(self, key: str, **fields: Any) -> None:
        """Create or update the profiling record of ``key`` with the given fields."""
        bad = set(fields) - set(self.PROFILING_FIELDS)
        if bad:
            raise ValueError(f"unknown profiling fields {sorted(bad)}")
        if "status" in fields and fields["status"] == "submitted":
            fields.setdefault("finished", None)
            fields.setdefault("cpu_s", None)
            fields.setdefault("note", None)
        cols = ["key", *fields]
        sets = ", ".join(f"{k} = excluded.{k}" for k in fields)
        self.db.execute(f"INSERT INTO profiling ({', '.join(cols)}) VALUES "
                        f"({', '.join('?' * len(cols))}) ON CONFLICT(key) DO UPDATE SET "
                        f"{sets}", (key, *fields.values()))

    def profiling(self) -> dict[str, dict[str, Any]]:
        cur = self.db.execute("SELECT * FROM profiling ORDER BY submitted")
        names = [d[0] for d in cur.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cur}

    # -- how long each key's jobs run (the time a running job has left, for requeues) ----
    def note_runs(self, rows: Iterable[tuple[int, str, float, float]], now: float,
                  requeued: Iterable[int] = (), keep: int = RUNS_KEPT_PER_KEY) -> None:
        """The running jobs of this round: (job id, key, start, seconds run so far at the
        proportional speed). A job's row stops being updated when it leaves Slurm: its last
        one is how long it ran (to within a round). ``requeued`` jobs (pending again) are
        forgotten: their run was cut short. Only each key's latest ``keep`` stay."""
        self.db.executemany("DELETE FROM runs WHERE job_id = ?", [(j,) for j in requeued])
        self.db.executemany(
            "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?)",
            [(j, k, started, now, prop_s) for j, k, started, prop_s in rows])
        self.db.execute("DELETE FROM runs WHERE job_id IN (SELECT job_id FROM (SELECT job_id,"
                        " ROW_NUMBER() OVER (PARTITION BY key ORDER BY seen DESC) AS n FROM "
                        "runs) WHERE n > ?)", (keep,))

    def typical_runs(self, live: Iterable[int], least: int = 3
                     ) -> dict[str, tuple[float, int]]:
        """Per key with at least ``least`` finished jobs (those not ``live`` in Slurm): the
        median of how long they ran at the proportional speed, and how many."""
        now_live = set(live)
        by: dict[str, list[float]] = {}
        for job_id, key, prop_s in self.db.execute(
                "SELECT job_id, key, prop_s FROM runs WHERE prop_s > 0"):
            if job_id not in now_live:
                by.setdefault(key, []).append(float(prop_s))
        return {k: (statistics.median(v), len(v)) for k, v in by.items() if len(v) >= least}

    # -- the closed loop (controller/usage.py) --------------------------------------------
    def note_usage(self, rows: Iterable[dict[str, Any]], keep_s: float = USAGE_KEEP_S) -> None:
        """The latest use of running jobs (one row per job, replaced as it runs on); rows
        not updated for ``keep_s`` are dropped (the evidence of the last month counts)."""
        self.db.execute("DELETE FROM usage WHERE at < ?", (time.time() - keep_s,))
        self.db.executemany(
            "INSERT OR REPLACE INTO usage (job_id, key, user, granted_cpus, granted_mem_gb, "
            "fair_cpus, fair_mem_gb, used_cpus, peak_mem_gb, observed_s, at, throughput, "
            "predicted, slot, could_cpus) VALUES (:job_id, :key, :user, :granted_cpus, "
            ":granted_mem_gb, :fair_cpus, :fair_mem_gb, :used_cpus, :peak_mem_gb, "
            ":observed_s, :at, :throughput, :predicted, :slot, :could_cpus)",
            [{"throughput": None, "predicted": None, "slot": None, "could_cpus": None, **r}
             for r in rows])

    def usage(self, key: str | None = None) -> list[dict[str, Any]]:
        return self._by_key("usage", key, "key, user, job_id")

    def peak_mem(self, job_ids: Iterable[int]) -> dict[int, float]:
        """The peak memory per GPU (GB) measured for each of ``job_ids`` that has one."""
        ids = sorted(set(job_ids))
        out: dict[int, float] = {}
        for i in range(0, len(ids), 500):           # within SQLite's parameter limit
            chunk = ids[i:i + 500]
            out.update(self.db.execute(
                "SELECT job_id, peak_mem_gb FROM usage WHERE peak_mem_gb IS NOT NULL AND "
                f"job_id IN ({','.join('?' * len(chunk))})", chunk).fetchall())
        return out

    def forget_usage(self, slot: str) -> None:
        """Drop the use measured against a profile that was just measured again."""
        self.db.execute("DELETE FROM usage WHERE slot = ?", (slot,))

    def suspects(self, key: str | None = None) -> list[dict[str, Any]]:
        return self._by_key("suspects", key, "key, user")

    def _by_key(self, table: str, key: str | None, order: str) -> list[dict[str, Any]]:
        """Rows of a closed-loop table (all, or one key's); none from a state file of an
        earlier version, opened read-only."""
        if not has_table(self.db, table):
            return []
        sql, args = f"SELECT * FROM {table}", tuple[str, ...]()
        if key is not None:
            sql, args = sql + " WHERE key = ?", (key,)
        cur = self.db.execute(f"{sql} ORDER BY {order}", args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur]

    def mark_suspect(self, key: str, user: str, **fields: Any) -> None:
        cols = ["key", "user", *fields]
        sets = ", ".join(f"{k} = excluded.{k}" for k in fields)
        self.db.execute(f"INSERT INTO suspects ({', '.join(cols)}) VALUES "
                        f"({', '.join('?' * len(cols))}) ON CONFLICT(key, user) DO UPDATE "
                        f"SET {sets}", (key, user, *fields.values()))

    def clear_suspect(self, key: str, user: str | None) -> int:
        """Forget a mark and the use behind it (every user's for ``user`` None): the key
        is trusted again until new use says otherwise. Returns the marks cleared."""
        where, args = ("key = ?", (key,)) if user is None else \
            ("key = ? AND user = ?", (key, user))
        self.db.execute(f"DELETE FROM usage WHERE {where}", args)
        return self.db.execute(f"DELETE FROM suspects WHERE {where}", args).rowcount

