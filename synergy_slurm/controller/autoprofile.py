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

import contextlib
import json
import logging
import os
import pwd
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..config import Config
from ..core import Profile, pick_profile, profile_slot
from ..profiles.store import ProfileStore
from ..slurm.commands import SlurmError
from ..slurm.model import SlurmJob, Snapshot
from ..slurm.ports import Writer
from ..slurm.profiling_job import profiling_job_options
from ..slurm.writer import NotEnforcing
from ..vocabulary import KEY_RE, LIVE_STATES
from .classify import dataset_gb, profile_key
from .state import StateStore

log = logging.getLogger(__name__)

RUNNER = ('#!/bin/sh\n# Written by synergy-controller: runs the profiler given as '
          'arguments.\nexec "$@"\n')


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

    def round(self, snap: Snapshot, managed: Iterable[SlurmJob],
              profiles: Mapping[str, Profile],
              types_of: Callable[[SlurmJob], frozenset[str]], now: float,
              stale: frozenset[str] = frozenset()) -> list[ProfilingEvent]:
        """``types_of``: the GPU types a job may run on (``observe.Pool.types``); a key is
        profiled per type (its slot ``KEY@TYPE``), on a node of that type. ``stale``:
        measured profiles (slots) a job's progress is far off: profiled again, at most
        once per ``retry_after_s``, the old profile serving until the new one is stored."""
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
            again = known is not None and known.slot in stale
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
                "--nodes=1", "--no-requeue", f"--chdir={spool}", f"--output={spool}/slurm.out",
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
        (spool / "run.sh").write_text(RUNNER)
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
        """Import the results of profiling jobs that have ended."""
        live = {j.job_id for j in snap.jobs if j.state in LIVE_STATES}
        events = []
        for slot, rec in self.state.profiling().items():
            if rec["status"] != "submitted" or rec["slurm_job"] in live:
                continue
            spool = Path(rec["spool"])
            ev = ProfilingEvent(slot, rec["user"], rec["for_job"], "failed",
                                slurm_job=rec["slurm_job"])
            key, _, gpu_type = slot.partition("@")
            try:
                doc = json.loads((spool / "profile.json").read_text())
                stored = ProfileStore(self.cfg.profiles.store).import_result(
                    doc, key, source=f"auto-profile job {rec['slurm_job']} ({rec['user']})",
                    gpu_type=gpu_type, owner=rec["user"])
            except FileNotFoundError:
                why = "ended without a result: " + _tail(spool / "slurm.out")
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
            events.append(ProfilingEvent(ev.key, ev.user, ev.for_job, "failed", why[:300],
                                         ev.slurm_job))
        return events


def _tail(path: Path, chars: int = 300) -> str:
    with contextlib.suppress(OSError):
        text = path.read_text(errors="replace").strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return " | ".join(lines[-3:])[-chars:] or "no output"
    return "no output"

