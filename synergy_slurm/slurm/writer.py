"""Changing jobs in Slurm, with the recipes verified on 22.05 (../shared/SLURM_FACTS.md).

- A pending job's cores/GPU and memory are set with ``CpusPerTres``/``MemPerTres`` sent
  together with its GPU request (``TresPerJob`` or ``TresPerNode``) and an explicit core
  count (``NumCPUs`` / ``MinCPUsNode``); memory of a ``--mem`` job goes to
  ``MinMemoryNode``. 22.05 silently ignores lowering the cores of a job its scheduler has
  already evaluated (not of a held one), so every change is read back and a change Slurm
  did not take raises :class:`ChangeIgnored`.
- A running job is requeued into a new shape: ``requeuehold``, wait until PENDING, update
  with ``NumCPUs=N-N`` and ``StartTime=now``, release.
- A running job's memory is lowered in place with ``MinMemoryNode`` (26.05, downward only,
  for jobs with an extern step: ``PrologFlags=Contain``), read back from its allocation.

Every mutating call passes through :meth:`SlurmWriter.mutate` (or, for the profiling jobs
the controller submits, :meth:`SlurmWriter.submit_as`), which refuse unless the writer was
made with ``enforce=True``.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, replace

from .commands import SlurmCLI, SlurmError, safe_arg
from .model import SlurmJob
from .parse import per_gpu_value
from .squeue_text import job_fields_args, new_token, parse_job_fields
from .units import size_mb, tres_items

log = logging.getLogger(__name__)

# The only scontrol verbs synergy sends that change anything: shaping a pending job,
# releasing what the hook held, and stopping a running job to requeue it into a new shape.
MUTATING_VERBS = frozenset({"update", "release", "requeuehold"})
MAX_CPUS_PER_GPU = 1024
MAX_MEM_PER_GPU_MB = 64 * 1024 * 1024
# The hook's tag on a job it held, and what the controller makes of it once released.
HELD_TAG = "synergy.held=1"
RELEASED_TAG = "synergy.held=0"
USER_RE = re.compile(r"^[a-z_][a-z0-9_.\-]{0,31}$")


def _released(admin_comment: str) -> str:
    """The admin comment with synergy's held tag turned into its released one."""
    return ",".join(RELEASED_TAG if t == HELD_TAG else t for t in admin_comment.split(","))


class NotEnforcing(PermissionError):
    """A mutating Slurm command was asked for while not in enforce mode."""


class ChangeIgnored(SlurmError):
    """Slurm accepted an update but the job does not show it."""


class Unsupported(ValueError):
    """A job shape synergy does not change (e.g. ``--gpus-per-task``)."""


@dataclass(frozen=True)
class Shape:
    cpus_per_gpu: int
    mem_per_gpu_mb: int

    def __post_init__(self) -> None:
        if not (isinstance(self.cpus_per_gpu, int) and 1 <= self.cpus_per_gpu <= MAX_CPUS_PER_GPU):
            raise ValueError(f"cpus per GPU must be 1..{MAX_CPUS_PER_GPU}, "
                             f"got {self.cpus_per_gpu!r}")
        if not (isinstance(self.mem_per_gpu_mb, int)
                and 1 <= self.mem_per_gpu_mb <= MAX_MEM_PER_GPU_MB):
            raise ValueError(f"memory per GPU must be 1..{MAX_MEM_PER_GPU_MB} MB, "
                             f"got {self.mem_per_gpu_mb!r}")


class SlurmWriter:
    def __init__(self, cli: SlurmCLI, enforce: bool = False, poll_s: float = 0.25) -> None:
        self.cli = cli
        self.enforce = enforce
        self.poll_s = poll_s

    # -- the one gate ---------------------------------------------------------------------
    def mutate(self, args: list[str]) -> str:
        if not args or args[0] not in MUTATING_VERBS:
            raise ValueError(f"refusing scontrol {args[0] if args else '(nothing)'}: synergy "
                             f"only sends {', '.join(sorted(MUTATING_VERBS))}")
        if not self.enforce:
            raise NotEnforcing(f"not enforcing: refusing scontrol {' '.join(args)}")
        for a in args:
            safe_arg(a)
        log.info("scontrol %s", " ".join(args))
        return self.cli.run("scontrol", args)

    def submit_as(self, user: str, gid: int, args: list[str], script: str,
                  script_args: list[str]) -> int:
        """``sbatch --uid --gid`` (root only): a job that runs as ``user``, e.g. the
        profiling job the controller submits on behalf of a user's job."""
        if not self.enforce:
            raise NotEnforcing(f"not enforcing: refusing sbatch as {user}")
        if not USER_RE.match(user):
            raise ValueError(f"refusing unsafe user name {user!r}")
        argv = ["--parsable", f"--uid={user}", f"--gid={int(gid)}", *args, script,
                *script_args]
        for a in argv:
            safe_arg(a)
        log.info("sbatch %s", " ".join(argv))
        out = self.cli.run("sbatch", argv)
        return int(out.strip().split(";")[0])

    def batch_script(self, job_id: int) -> str:
        """The job's batch script (``scontrol write batch_script ID -``); reading only."""
        return self.cli.run("scontrol", ["write", "batch_script", str(int(job_id)), "-"])

    # -- pending jobs ---------------------------------------------------------------------
    def shape_args(self, job: SlurmJob, shape: Shape) -> list[str]:
        """The ``scontrol update`` arguments that give ``job`` this per-GPU shape."""
        if not job.has_gpus:
            raise Unsupported(f"job {job.job_id} has no GPUs")
        gtype = f"{safe_arg(job.gpu_type)}:" if job.gpu_type else ""
        c, m = shape.cpus_per_gpu, shape.mem_per_gpu_mb
        args = [f"JobId={int(job.job_id)}"]
        explicit_mem = job.mem_per_node_mb is not None or job.mem_per_cpu_mb is not None
        if job.gpus_per_job is not None:
            g = job.gpus_per_job
            args += [f"TresPerJob=gres:gpu:{gtype}{g}", f"CpusPerTres=gres:gpu:{c}",
                     f"NumCPUs={g * c}"]
            if explicit_mem:
                if job.num_nodes != 1:
                    raise Unsupported(f"job {job.job_id}: --mem with --gpus over nodes")
                args.append(f"MinMemoryNode={g * m}")
            else:
                args.append(f"MemPerTres=gres:gpu:{m}")
        elif job.gpus_per_node is not None:
            g = job.gpus_per_node
            args += [f"TresPerNode=gres:gpu:{gtype}{g}", f"CpusPerTres=gres:gpu:{c}",
                     f"MinCPUsNode={g * c}"]
            args.append(f"MinMemoryNode={g * m}" if explicit_mem else f"MemPerTres=gres:gpu:{m}")
        else:
            raise Unsupported(f"job {job.job_id}: only --gpus and --gpus-per-node/--gres "
                              "jobs are reshaped")
        return args

    def reshape_pending(self, job: SlurmJob, shape: Shape) -> dict[str, str]:
        """Set a pending job's cores/GPU and memory; read back; raise ChangeIgnored if the
        job does not show the new shape."""
        self.mutate(["update", *self.shape_args(job, shape)])
        return self.verify(job, shape)

    def verify(self, job: SlurmJob, shape: Shape) -> dict[str, str]:
        fields = self.read(job.job_id)
        got_c = per_gpu_value(fields.get("CpusPerTres", ""))
        got_m = per_gpu_value(fields.get("MemPerTres", ""))
        if got_c != shape.cpus_per_gpu:
            raise ChangeIgnored(f"job {job.job_id}: asked {shape.cpus_per_gpu} cores/GPU, "
                                f"Slurm shows CpusPerTres={fields.get('CpusPerTres')}")
        if got_m is not None and got_m != shape.mem_per_gpu_mb:
            raise ChangeIgnored(f"job {job.job_id}: asked {shape.mem_per_gpu_mb} MB/GPU, "
                                f"Slurm shows MemPerTres={fields.get('MemPerTres')}")
        return fields

    def read(self, job_id: int) -> dict[str, str]:
        """The job's state, reason, allocation and per-GPU shape under scontrol's keys
        (JobId, JobState, Reason, AllocTRES, CpusPerTres, MemPerTres), read from ``squeue``
        between tokens drawn for this read: ``scontrol show job -o`` text lets a job's name
        or comment rewrite them (``squeue_text.WRITER_FIELDS``)."""
        token = new_token()
        out = self.cli.run("squeue", job_fields_args(job_id, token))
        records = parse_job_fields(out, token)
        if not records:
            raise SlurmError(f"job {job_id} not found")
        # An array's id lists every task's record: the one with this very id is the
        # pending tasks' record (or the task that kept the id).
        return next((r for r in records if r.get("JobId") == str(int(job_id))), records[0])

    def release(self, job_id: int) -> None:
        self.mutate(["release", str(int(job_id))])

    def release_own(self, job: SlurmJob) -> None:
        """Release a hold the hook made and clear its tag (``synergy.held=1`` becomes
        ``synergy.held=0``): left set, the tag would make a later hold by an admin or the
        job's user look like synergy's, and the next round, the fail-safe or a shutdown
        would undo it. Released first: a cleared tag on a job still held would leave it
        held with nobody to release it. A tag that cannot be cleared is logged; the
        reason (JobHeldAdmin) still keeps an admin's hold from being taken for ours."""
        self.release(job.job_id)
        if HELD_TAG in job.admin_comment.split(","):
            self._untag(job)

    # -- running jobs ---------------------------------------------------------------------
    def requeue_reshape(self, job: SlurmJob, shape: Shape, timeout_s: float = 60.0) -> None:
        """Stop a running job, give it the new shape and let it start again. Never leaves
        it held: tagged as synergy's hold first (``synergy.held=1``), so that a job whose
        requeue fails after it stopped (an update Slurm refuses, a job COMPLETING longer
        than ``timeout_s``) is released here, and where even that fails, by the next
        round, the fail-safe or the controller's stop, as any hold the hook made."""
        if not job.requeue or not job.batch:
            raise Unsupported(f"job {job.job_id} may not be requeued")
        mine = self._tag_held(job)
        try:
            self.mutate(["requeuehold", str(int(job.job_id))])
        except (SlurmError, ValueError):
            self._untag(mine)
            raise
        try:
            self._reshape_requeued(job, shape, timeout_s)
        except BaseException:
            self._release_after_failure(mine)
            raise
        self.release_own(mine)   # raises if it fails: the next round releases it

    def _reshape_requeued(self, job: SlurmJob, shape: Shape, timeout_s: float) -> None:
        self.wait_state(job.job_id, "PENDING", timeout_s)
        time.sleep(1.0)  # an update sent in the first second after requeue can be lost
        args = self.shape_args(job, shape)
        if job.gpus_per_job is not None:
            n = job.gpus_per_job * shape.cpus_per_gpu
            args = [a if not a.startswith("NumCPUs=") else f"NumCPUs={n}-{n}" for a in args]
        self.mutate(["update", *args, "StartTime=now"])
        self.verify(job, shape)

    def _release_after_failure(self, job: SlurmJob) -> None:
        """Release a requeued job whose new shape failed (it runs as it was); a release
        that fails too is logged and left to the next round (the job carries synergy's
        tag), and the first failure is what the caller sees."""
        try:
            self.release_own(job)
        except (SlurmError, ValueError) as exc:
            log.error("job %d requeued but not released (the next round releases it): %s",
                      job.job_id, exc)

    def _tag_held(self, job: SlurmJob) -> SlurmJob:
        """Mark ``job`` as held by synergy (its admin comment gets ``synergy.held=1``);
        the job as it is now tagged."""
        tokens = [t for t in job.admin_comment.split(",") if t and t != RELEASED_TAG]
        tagged = ",".join([*[t for t in tokens if t != HELD_TAG], HELD_TAG])
        self.mutate(["update", f"JobId={int(job.job_id)}", f"AdminComment={tagged}"])
        return replace(job, admin_comment=tagged)

    def clear_held_tag(self, job: SlurmJob) -> None:
        """Turn ``synergy.held=1`` into ``synergy.held=0`` on a job someone else released
        (its user may release the hook's hold early): left set, a later hold of theirs
        would look like synergy's. Logged, never raised."""
        self._untag(job)

    def _untag(self, job: SlurmJob) -> None:
        try:
            self.mutate(["update", f"JobId={int(job.job_id)}",
                         f"AdminComment={_released(job.admin_comment)}"])
        except (SlurmError, ValueError) as exc:
            log.error("could not clear the held tag of %d: %s", job.job_id, exc)

    def lower_running_memory(self, job: SlurmJob, mem_per_gpu_mb: int,
                             timeout_s: float = 20.0) -> None:
        """Lower a running job's memory to ``mem_per_gpu_mb`` per GPU on each of its nodes,
        in place; raise :class:`ChangeIgnored` if its allocation does not show it after.
        Slurm sets memory per node for a running job: a job with different GPU counts on
        its nodes is refused (per node, it would hold too much or too little)."""
        per_node = {a.gpus for a in job.alloc if a.gpus > 0}
        if not job.running or len(per_node) != 1:
            raise Unsupported(f"job {job.job_id}: only a running job with the same GPUs on "
                              "each node has its memory lowered in place")
        [gpus] = per_node
        want = gpus * int(mem_per_gpu_mb)
        if not 1 <= want < max(a.mem_mb for a in job.alloc):
            raise Unsupported(f"job {job.job_id}: {want} MB per node is not lower than "
                              "what it holds")
        try:
            self.mutate(["update", f"JobId={int(job.job_id)}", f"MinMemoryNode={want}"])
        except SlurmError as exc:
            if "extern step" in exc.stderr:
                # Started before PrologFlags=Contain: this job can never be lowered.
                raise Unsupported(f"job {job.job_id}: Slurm lowers a running job's memory "
                                  f"only with an extern step ({exc.stderr[:120]})") from None
            raise
        # The resize is asynchronous: slurmctld marks the job RESIZING, asks each node's
        # slurmd to lower its limit and changes the allocation only when every node has
        # answered (seconds on a loaded machine). Wait for that before calling it done.
        nodes = len([a for a in job.alloc if a.gpus > 0])
        deadline = time.monotonic() + timeout_s
        while True:
            fields = self.read(job.job_id)
            held = tres_items(fields.get("AllocTRES", "")).get("mem", "")
            # AllocTRES may round large values into G/T units: within half a percent.
            if held and abs(size_mb(held) - want * nodes) <= 0.005 * want * nodes:
                return
            reason = fields.get("Reason", "")
            if reason.startswith(f"Memory_resize_to_{want}MB_failed"):
                # A node could not apply it (cgroup v1 refuses a limit below what the job
                # uses): Slurm keeps the old allocation and the job runs on.
                raise ChangeIgnored(f"job {job.job_id}: asked {want} MB per node, Slurm says "
                                    f"{reason}; it keeps {held or '?'}")
            if time.monotonic() > deadline:
                raise ChangeIgnored(f"job {job.job_id}: asked {want} MB per node, Slurm "
                                    f"shows AllocTRES={fields.get('AllocTRES')} after "
                                    f"{timeout_s:.0f} s")
            time.sleep(self.poll_s)

    def wait_state(self, job_id: int, state: str, timeout_s: float) -> dict[str, str]:
        deadline = time.monotonic() + timeout_s
        while True:
            fields = self.read(job_id)
            if fields.get("JobState") == state:
                return fields
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job_id} not {state} after {timeout_s:.0f} s "
                                 f"(is {fields.get('JobState')})")
            time.sleep(self.poll_s)
