"""Profiling jobs the controller submits for managed jobs whose profile key is unknown.

The first job of a new kind runs GPU-proportional (there is nothing better to give it);
meanwhile one short profiling job per key runs *as that job's user* (``sbatch --uid/--gid``,
so the cost lands on the user's account or the configured ``[profiling] account``), at the
lowest priority (``--nice=10000``), with a time limit of the profile budget + 2 minutes,
marked ``synergy:off`` so that neither the hook nor the controller shape it. It runs the
user's own batch script under ``synergy profile run --out``, in a spool directory owned by
the user; when it has ended the controller imports the result into the profile store (the
only writer of the store), and later jobs of that key are shaped by it. A failed profile
stores nothing and is retried after ``retry_after_s``.

What profiling cost (the CPU-seconds the search used, and the Slurm job id) is kept per
key in the controller's state, apart from the jobs it was for, and in the store.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config import Config
from ..core import Profile, pick_profile, profile_slot
from ..profiles.store import ProfileStore, StoredProfile, parse_result
from ..slurm.commands import SlurmError
from ..slurm.model import SlurmJob, Snapshot
from ..slurm.ports import Writer
from ..slurm.profiling_job import profiling_job_options
from ..slurm.writer import NotEnforcing
from ..userfiles import UserFileError, open_user_dir, read_user_file, user_uid
from ..vocabulary import KEY_RE, LIVE_STATES
from .classify import dataset_gb, profile_key
from .state import StateStore

log = logging.getLogger(__name__)

# The profiling job is submitted with --export=NIL: it would otherwise inherit the
# controller's environment (root's PATH, HOME, SLURM_CONF, whatever the unit set) into a
# job that runs the user's script. What it needs is set here, from the user's passwd entry.
# NIL, not NONE: for a job root submits with --uid, NONE makes slurmd load the user's login
# environment (su - USER), and where that fails (a user without a usable login, as in the
# dev cluster's roots on 26.05) Slurm requeues the job held ("user env retrieval failed").
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


def runner_script(pw: pwd.struct_passwd) -> str:
    """The profiling job's batch script: a clean environment (the user's name, home and
    shell, a plain PATH), then the profiler given as arguments."""
    env = {"PATH": SAFE_PATH, "HOME": pw.pw_dir, "USER": pw.pw_name,
           "LOGNAME": pw.pw_name, "SHELL": pw.pw_shell or "/bin/sh", "LANG": "C.UTF-8"}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return ("#!/bin/sh\n# Written by synergy-controller: runs the profiler given as "
            f"arguments, in a clean environment (--export=NIL).\nexport {exports}\n"
            'exec "$@"\n')


@dataclass(frozen=True)
class ProfilingEvent:
    key: str
    user: str
    for_job: int
    what: str                 # submitted | would-submit | stored | failed | error
    detail: str = ""
    slurm_job: int | None = None


class AutoProfiler:
    def __init__(self, cfg: Config, writer: Writer, state: StateStore,
                 mode: str) -> None:
        self.cfg = cfg
        self.p = cfg.profiling
        self.writer = writer
        self.state = state
        self.mode = mode
        if self.p.auto and mode == "enforce" and os.geteuid() != 0:
            # sbatch takes --uid from root only, and the spool is handed to the user.
            log.warning("[profiling] auto needs root (sbatch --uid, the spool chown): as "
                        "uid %d every profiling job fails; a Slurm operator runs the "
                        "controller with auto = false", os.geteuid())

    def round(self, snap: Snapshot, managed: Iterable[SlurmJob],
              profiles: Mapping[str, Profile],
              types_of: Callable[[SlurmJob], frozenset[str]], now: float,
              stale: frozenset[str] = frozenset(),
              owners: Mapping[str, str] | None = None) -> list[ProfilingEvent]:
        """``types_of``: the GPU types a job may run on (``observe.Pool.types``); a key is
        profiled per type (its slot ``KEY@TYPE``), on a node of that type. ``stale``:
        measured profiles (slots) a job's progress is far off: profiled again, at most
        once per ``retry_after_s``, the old profile serving until the new one is stored;
        only a profile measured for the job's own user (``owners``: slot -> user) is
        profiled again for them: a site-wide or another user's profile is not theirs to
        replace (the store refuses it), an admin profiles it again."""
        events = self._collect(snap, now)
        if not self.p.auto:
            return events
        stored_now = {e.key for e in events if e.what == "stored"}
        records = self.state.profiling()
        for job in managed:
            key = profile_key(job)
            if key is None or not KEY_RE.match(key):
                continue
            types = types_of(job)
            known = pick_profile(profiles, key, types)
            again = (known is not None and known.slot in stale
                     and (owners or {}).get(known.slot) == job.user)
            if known is not None and not again:
                continue
            slot = known.slot if known is not None and again else (
                profile_slot(key, next(iter(types))) if len(types) == 1 else key)
            rec = records.get(slot)
            if slot in stored_now or (rec is not None and (
                    rec["status"] == "submitted" or (rec["status"] == "stored" and not again)
                    or now - (rec["finished"] or rec["submitted"] or 0) < self.p.retry_after_s)):
                continue
            if len(types) > 1:
                events.append(self._fail_submit(
                    ProfilingEvent(slot, job.user, job.job_id, "would-submit"), now,
                    f"the job may run on {', '.join(sorted(t or 'untyped' for t in types))} "
                    "GPUs, and a profile holds for one type: ask for one (--gpus=TYPE:N)"))
            else:
                events.append(self._submit(job, slot, snap, now))
            records[slot] = {"status": "submitted"}     # one profiling job per slot
        for ev in events:
            log.info("profiling %s for job %d (%s): %s %s", ev.key, ev.for_job, ev.user,
                     ev.what, ev.detail)
        return events

    # -- submit ---------------------------------------------------------------------------
    def _max_cpus(self, job: SlurmJob, snap: Snapshot) -> int:
        gpus = max(1, job.gpus)
        if self.p.max_cpus_per_gpu:
            return self.p.max_cpus_per_gpu * gpus
        nodes = [n for n in snap.nodes if n.gpus and job.partition in n.partitions]
        node_cpus = max((n.cpus for n in nodes), default=0)
        per_node = job.gpus_per_node or gpus
        return max(1, node_cpus // max(1, per_node)) * gpus if node_cpus else 4 * gpus

    def _submit(self, job: SlurmJob, slot: str, snap: Snapshot, now: float
                ) -> ProfilingEvent:
        key, _, gpu_type = slot.partition("@")
        ev = ProfilingEvent(slot, job.user, job.job_id, "would-submit")
        if self.mode != "enforce":
            return ev
        try:
            pw = pwd.getpwnam(job.user)
        except KeyError:
            return self._fail_submit(ev, now, f"no such user {job.user!r} on this host")
        gpus = max(1, job.gpus)
        if gpus != (job.gpus_per_node or gpus):
            return self._fail_submit(ev, now, "multi-node jobs are profiled on one node "
                                              "only with --profile-key of a 1-node run")
        max_cpus = self._max_cpus(job, snap)
        try:
            script = self.writer.batch_script(job.job_id)
        except SlurmError as exc:
            return self._fail_submit(ev, now, f"cannot read the batch script: {exc}")
        spool = Path(self.p.spool) / f"{slot.replace('@', '-')}-{job.job_id}"
        try:
            self._prepare(spool, script, pw)
        except OSError as exc:
            return self._fail_submit(ev, now, f"cannot prepare {spool}: {exc}")
        args = [*profiling_job_options(key, gpus, self.p.budget_s, max(1, max_cpus // gpus),
                                       gpu_type),
                "--nodes=1", "--no-requeue", "--export=NIL", f"--chdir={spool}",
                f"--output={spool}/slurm.out",
                f"--partition={self.p.partition or job.partition}"]
        if self.p.account:
            args.append(f"--account={self.p.account}")
        profiler = self.p.command.split() if self.p.command else \
            [sys.executable, "-m", "synergy_slurm.cli.main"]
        run = [*profiler, "profile", "run", "--key", key, "--gpus", str(gpus),
               "--max-cpus", str(max_cpus), "--budget-s", f"{self.p.budget_s:g}",
               "--out", str(spool / "profile.json")]
        size = dataset_gb(job)
        if size:
            run += ["--dataset-gb", f"{size:g}", "--disk-gb-s", f"{self.p.disk_gb_s:g}",
                    "--mem-gb-s", f"{self.p.mem_gb_s:g}"]
        run += ["--", str(spool / "job.sh")]
        try:
            jid = self.writer.submit_as(job.user, pw.pw_gid, args, str(spool / "run.sh"), run)
        except (SlurmError, NotEnforcing, ValueError) as exc:
            return self._fail_submit(ev, now, f"sbatch failed: {exc}")
        self.state.note_profiling(slot, user=job.user, for_job=job.job_id, slurm_job=jid,
                                  status="submitted", submitted=now, spool=str(spool))
        return ProfilingEvent(slot, job.user, job.job_id, "submitted",
                              f"Slurm job {jid}, up to {max_cpus} cores", jid)

    def _prepare(self, spool: Path, script: str, pw: pwd.struct_passwd) -> None:
        if spool.exists():
            shutil.rmtree(spool)
        spool.parent.mkdir(parents=True, exist_ok=True)
        for d in (spool.parent, *spool.parent.parents):
            if not d.stat().st_mode & 0o001:
                raise PermissionError(f"{d} is not searchable by other users: the "
                                      f"profiling job of {pw.pw_name} could not reach it")
        spool.mkdir(mode=0o700)
        (spool / "job.sh").write_text(script)
        (spool / "run.sh").write_text(runner_script(pw))
        for name in ("job.sh", "run.sh"):
            (spool / name).chmod(0o700)
        if os.geteuid() == 0:
            for path in (spool, spool / "job.sh", spool / "run.sh"):
                os.chown(path, pw.pw_uid, pw.pw_gid)
        elif pw.pw_uid != os.geteuid():
            raise PermissionError(f"only root can prepare a profiling job for {pw.pw_name}")

    def _fail_submit(self, ev: ProfilingEvent, now: float, why: str) -> ProfilingEvent:
        self.state.note_profiling(ev.key, user=ev.user, for_job=ev.for_job, slurm_job=None,
                                  status="failed", submitted=now, finished=now, note=why)
        return ProfilingEvent(ev.key, ev.user, ev.for_job, "error", why)

    # -- collect --------------------------------------------------------------------------
    def _collect(self, snap: Snapshot, now: float) -> list[ProfilingEvent]:
        """Import the results of profiling jobs that have ended. The spool directory is
        the user's: its result is read as the user's file (:mod:`synergy_slurm.userfiles`),
        and what the job printed is never read (its output is the user's to look at: a
        note every user can see names only where it is)."""
        live = {j.job_id for j in snap.jobs if j.state in LIVE_STATES}
        events = []
        for slot, rec in self.state.profiling().items():
            if rec["status"] != "submitted" or rec["slurm_job"] in live:
                continue
            ev = ProfilingEvent(slot, rec["user"], rec["for_job"], "failed",
                                slurm_job=rec["slurm_job"])
            try:
                stored = self._import(slot, rec)
            except FileNotFoundError:
                why = (f"ended without a result (its output: {rec['spool']}/slurm.out, "
                       f"readable by {rec['user']})")
            except (OSError, ValueError) as exc:   # ProfileError is a ValueError
                why = f"bad result: {exc}"
            else:
                self.state.note_profiling(slot, status="stored", finished=now,
                                          cpu_s=stored.profiling_cpu_s,
                                          note=f"{stored.measured_points} points")
                events.append(ProfilingEvent(
                    slot, rec["user"], rec["for_job"], "stored",
                    f"{stored.measured_points} points, {stored.profiling_cpu_s:.1f} CPU-s",
                    rec["slurm_job"]))
                continue
            self.state.note_profiling(slot, status="failed", finished=now, note=why[:500])
            events.append(replace(ev, detail=why[:300]))
        return events

    def _import(self, slot: str, rec: Mapping[str, Any]) -> StoredProfile:
        """Read the result the profiling job left (a regular file of the user's, not a
        link, at most RESULT_MAX_BYTES), refuse a profile that would take a job below its
        measured proportional speed, and store it as the user's own (the store refuses to
        replace a site-wide or another user's profile)."""
        key, _, gpu_type = slot.partition("@")
        user = str(rec["user"])
        uid = user_uid(user)
        if uid is None:
            raise UserFileError(f"no such user {user!r} on this host")
        spool = Path(rec["spool"])
        dfd = open_user_dir(spool, uid)
        try:
            raw = read_user_file("profile.json", uid, RESULT_MAX_BYTES, dir_fd=dfd)
        finally:
            os.close(dfd)
        prof, points, cpu_s = parse_result(json.loads(raw), key, gpu_type)
        why = below_measured(prof, self.state.usage(key), user)
        if why:
            raise ValueError(why)
        store = ProfileStore(self.cfg.profiles.store)
        store.put(prof, measured_points=points, profiling_cpu_s=cpu_s,
                  source=f"auto-profile job {rec['slurm_job']} ({user})", owner=user)
        got = store.get(prof.slot)
        assert got is not None
        return got


# The largest result file read: a profile is a few KB; anything bigger is not one.
RESULT_MAX_BYTES = 1 << 20
# A profile may say a job is this much slower at its proportional share than its jobs were
# measured to run there (noise between runs; the profiler's own tolerance).
PROPORTIONAL_TOLERANCE = 0.10


def below_measured(prof: Profile, rows: Iterable[Mapping[str, Any]], user: str
                   ) -> str | None:
    """Why ``prof`` would take ``user``'s jobs below their measured proportional speed,
    None if it would not (or nothing was measured).

    The allocators give a job a shape only where its profile promises at least the
    throughput at the proportional share; that promise is kept in the profile's own
    numbers. Where the closed loop measured this user's jobs of the key running at exactly
    their proportional share (progress files: samples/s), a profile that puts the proportional
    share below that measured speed promises less than the job already had, and every
    shape it picks may then be slower than proportional: refused."""
    at_fair = [r for r in rows if r.get("user") == user and r.get("throughput")
               and r["granted_cpus"] == r["fair_cpus"]
               and abs(r["granted_mem_gb"] - r["fair_mem_gb"]) < 1e-6]
    if not at_fair:
        return None
    speeds = sorted(float(r["throughput"]) for r in at_fair)
    measured = speeds[len(speeds) // 2]
    r = at_fair[0]
    claimed = prof.at(r["fair_cpus"], r["fair_mem_gb"])
    if claimed >= measured * (1 - PROPORTIONAL_TOLERANCE):
        return None
    return (f"refused: the profile says {claimed:.3g} samples/s at the proportional share "
            f"({r['fair_cpus']} cores, {r['fair_mem_gb']:g} GB per GPU), where {len(speeds)} "
            f"of the user's jobs were measured at {measured:.3g}: its shapes could run them "
            "below their proportional speed")
