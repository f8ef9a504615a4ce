"""Reading the cluster: one batched read of jobs, nodes and partitions per call.

The release is detected on the first read (:mod:`.release`). Jobs come from ``squeue -O``
text (:class:`TextReader`, :mod:`.squeue_text`) or ``squeue --json`` (:class:`SlurmReader`),
the latter asked for the live states only where the release honours the filter (22.05
ignores it, so finished jobs are also dropped here); nodes from ``sinfo --json`` on 22.05
and ``scontrol show nodes --json`` from 23.02 (where ``sinfo --json`` has no per-node
records); partition defaults from ``scontrol show partition -o`` on every release.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..vocabulary import LIVE_STATES
from .commands import SlurmCLI, SlurmError
from .limits import ASSOC_FORMAT, QOS_FORMAT, SiteLimits, parse_assocs, parse_qos
from .model import NodeAlloc, Skipped, SlurmJob, Snapshot
from .parse import config_flags, parse_jobs, parse_nodes, parse_partitions, version_of
from .pyslurm_records import allocation, job_record, meta, node_record
from .release import Release, detect
from .squeue_text import TIME_ENV, new_token, parse_text_jobs, squeue_args
from .sstat import SSTAT_FIELDS, JobUse, parse_sstat, sstat_name

log = logging.getLogger(__name__)
# sacctmgr asks slurmdbd; a round should not wait long for it (the last limits stand in).
LIMITS_TIMEOUT_S = 10.0


class SlurmReader:
    def __init__(self, cli: SlurmCLI, release: Release | None = None) -> None:
        self.cli = cli
        self._release = release
        self._no_accounting_logged = False
        self._last_limits: SiteLimits | None = None

    @property
    def release(self) -> Release:
        """The running Slurm's release, read once (a failed read is retried next time)."""
        if self._release is None:
            self._release = detect(self.cli)
            log.info("Slurm %s: filtered squeue --json %s, nodes from %s", self._release,
                     "yes" if self._release.json_filters else "no",
                     "scontrol --json" if self._release.scontrol_json else "sinfo --json")
        return self._release

    def contains_jobs(self) -> bool:
        """Whether slurm.conf's PrologFlags has Contain: every job then has the extern step
        Slurm needs to lower its memory while it runs (``scontrol show config``)."""
        return "Contain" in config_flags(self.cli.run("scontrol", ["show", "config"]),
                                         "PrologFlags")

    def snapshot(self) -> Snapshot:
        return build_snapshot(self.jobs_raw(), self._nodes_raw(), self._partitions_raw())

    def raw(self) -> dict[str, str]:
        """Slurm's own output for one snapshot: ``squeue --json``, the nodes' JSON and
        ``scontrol show partition -o`` (what :mod:`.recording` saves)."""
        return {"jobs": self.jobs_raw(), "nodes": self._nodes_raw(),
                "partitions": self._partitions_raw()}

    def jobs_raw(self) -> str:
        rel = self.release
        states = ["-t", ",".join(sorted(LIVE_STATES))] if rel.json_filters else []
        return self.cli.run("squeue", ["--json", *states])

    def _nodes_raw(self) -> str:
        if self.release.scontrol_json:
            return self.cli.run("scontrol", ["show", "nodes", "--json"])
        return self.cli.run("sinfo", ["--json"])

    def _partitions_raw(self) -> str:
        return self.cli.run("scontrol", ["show", "partition", "-o"])

    def limits(self) -> SiteLimits | None:
        """The QOS and association limits on cores and memory (``sacctmgr show``, read-only),
        or None where there is no accounting database (logged once). When a read fails
        after one succeeded (slurmdbd restarting, a timeout), the last limits read are used
        again, so a hiccup never lets a plan past a limit."""
        try:
            qos_raw, assoc_raw = self.limits_raw()
        except SlurmError as exc:
            if self._last_limits is not None:
                log.warning("could not read the accounting limits (%s): using the last read",
                            exc)
                return self._last_limits
            if not self._no_accounting_logged:
                log.info("no accounting limits read (%s): only partition limits apply", exc)
                self._no_accounting_logged = True
            return None
        self._last_limits = site_limits(qos_raw, assoc_raw)
        return self._last_limits

    def limits_raw(self) -> tuple[str, str]:
        """``sacctmgr show qos`` and ``show assoc`` of the fields :mod:`.limits` reads
        (SlurmError without accounting)."""
        qos = self.cli.run("sacctmgr", ["-n", "-P", "show", "qos", f"format={QOS_FORMAT}"],
                           timeout_s=LIMITS_TIMEOUT_S)
        assoc = self.cli.run("sacctmgr", ["-n", "-P", "show", "assoc",
                                          f"format={ASSOC_FORMAT}"], timeout_s=LIMITS_TIMEOUT_S)
        return qos, assoc

    def usage(self, jobs: Sequence[SlurmJob]) -> dict[int, JobUse]:
        """What these running jobs used so far, by job id (``sstat``, one call for all;
        where that call fails, one call per job). Jobs sstat cannot tell (no step yet,
        ended, no job accounting) are missing from the result."""
        if not jobs:
            return {}
        names = {sstat_name(j.job_id, j.array_job_id, j.array_task_id): j.job_id
                 for j in jobs}
        ids = [str(int(j.job_id)) for j in jobs]
        args = ["-a", "-n", "-P", "-o", ",".join(SSTAT_FIELDS)]
        try:
            raws = [self.cli.run("sstat", [*args, "-j", ",".join(ids)])]
        except SlurmError as exc:
            log.debug("sstat for %d jobs failed (%s); asking one by one", len(ids), exc)
            raws = []
            for j in ids:
                try:
                    raws.append(self.cli.run("sstat", [*args, "-j", j]))
                except SlurmError as one:
                    log.debug("sstat for job %s: %s", j, one)
        out: dict[int, JobUse] = {}
        for raw in raws:
            got, skipped = parse_sstat(raw)
            for s in skipped:
                log.warning("sstat: skipped %s: %s", s.what, s.reason)
            out.update({names[n]: u for n, u in got.items() if n in names})
        return out



def site_limits(qos_raw: str, assoc_raw: str) -> SiteLimits:
    """The limits of ``sacctmgr show qos`` and ``show assoc`` output; records that cannot
    be read are skipped with a logged reason."""
    qos, qs = parse_qos(qos_raw)
    assocs, as_ = parse_assocs(assoc_raw)
    for s in (*qs, *as_):
        log.warning("skipped %s: %s", s.what, s.reason)
    return SiteLimits(tuple(qos), tuple(assocs), (*qs, *as_))


def build_snapshot(jobs_raw: str | Mapping[str, Any], nodes_raw: str | Mapping[str, Any],
                   parts_raw: str) -> Snapshot:
    jobs, js = parse_jobs(jobs_raw)
    return assemble(jobs, js, nodes_raw, parts_raw, version_of(jobs_raw))


def assemble(jobs: Sequence[SlurmJob], skipped_jobs: Sequence[Skipped],
             nodes_raw: str | Mapping[str, Any], parts_raw: str, version: str) -> Snapshot:
    """The snapshot of parsed jobs (the live ones kept) and the nodes' and partitions'
    output; every record skipped is logged with its reason."""
    nodes, ns = parse_nodes(nodes_raw)
    parts, ps = parse_partitions(parts_raw)
    skipped: list[Skipped] = [*skipped_jobs, *ns, *ps]
    for s in skipped:
        log.warning("skipped %s: %s", s.what, s.reason)
    live: list[SlurmJob] = [j for j in jobs if j.state in LIVE_STATES]
    return Snapshot(tuple(live), tuple(nodes), tuple(parts), version, tuple(skipped))


class TextReader(SlurmReader):
    """Jobs from ``squeue -O`` text (:mod:`.squeue_text`: the fields planning needs, a
    tenth of the JSON's cost at 10,000 jobs); nodes and partitions as :class:`SlurmReader`.

    Text does not show how a running job over several nodes is spread over them: those
    jobs' allocations come from ``squeue --json`` for them only (22.05, which ignores the
    filter, reads every job's JSON then), once per start: kept while the job runs on the
    same nodes with the same resources."""

    def __init__(self, cli: SlurmCLI, release: Release | None = None) -> None:
        super().__init__(cli, release)
        self._layouts: dict[int, tuple[str, tuple[NodeAlloc, ...]]] = {}

    def snapshot(self) -> Snapshot:
        rel = self.release
        token = new_token()
        raw = self.cli.run("squeue", squeue_args(token, sorted(LIVE_STATES)), env=TIME_ENV)
        got = parse_text_jobs(raw, token, rel)
        jobs = self._with_layouts(got.jobs, dict(got.needs_detail))
        return assemble(jobs, got.skipped, self._nodes_raw(), self._partitions_raw(),
                        str(rel))

    def _with_layouts(self, jobs: Sequence[SlurmJob], wanted: dict[int, str]
                      ) -> list[SlurmJob]:
        """The jobs, those in ``wanted`` (id -> what they hold, as text) with their
        allocation per node, read as JSON where not known for what they hold now."""
        self._layouts = {i: v for i, v in self._layouts.items() if wanted.get(i) == v[0]}
        missing = sorted(set(wanted) - set(self._layouts))
        if missing:
            ids = ["-j", ",".join(str(i) for i in missing)] if self.release.json_filters else []
            detailed, _ = parse_jobs(self.cli.run("squeue", ["--json", *ids]))
            for j in detailed:
                if j.job_id in wanted and j.alloc:
                    self._layouts[j.job_id] = (wanted[j.job_id], j.alloc)
            log.debug("read the layouts of %d jobs on several nodes as JSON", len(missing))
        return [replace(j, alloc=self._layouts[j.job_id][1]) if j.job_id in self._layouts
                else j for j in jobs]


READERS = ("auto", "text", "json", "pyslurm")


def make_reader(cli: SlurmCLI, choice: str = "auto") -> SlurmReader:
    """The reader ``[slurm] reader`` asks for. "text" and "auto": ``squeue -O`` text of the
    fields planning needs (every release; measured the fastest: at 10,000 pending jobs on
    24.11, 0.45-0.52 s a read against pyslurm's 0.73-1.02 s and the JSON's 7.3 s,
    ``benchmarks/slurm_read.py``); "json": ``squeue --json``. "pyslurm": pyslurm's, which
    must be importable and built for the running Slurm's release (else
    :class:`SlurmError`): each pyslurm release binds one Slurm release, and one built for
    another would read the wrong memory layout.
    """
    if choice not in READERS:
        raise ValueError(f"reader {choice!r}: choose from {', '.join(READERS)}")
    if choice == "json":
        return SlurmReader(cli)
    if choice in ("text", "auto"):
        log.info("reading Slurm's jobs as squeue's text ([slurm] reader = %r)", choice)
        return TextReader(cli)
    try:
        import pyslurm
    except ImportError as exc:
        raise SlurmError(f"[slurm] reader = \"pyslurm\", but pyslurm is not importable "
                         f"({exc})") from None
    built = str(getattr(pyslurm, "__version__", ""))
    running = detect(cli)
    if _release_of(built) != (running.major, running.minor):
        raise SlurmError(f"[slurm] reader = \"pyslurm\", but pyslurm {built or '?'} is built "
                         f"for another release than the running Slurm {running}")
    log.info("reading Slurm %s with pyslurm %s", running, built)
    return PyslurmReader(cli, pyslurm, running)


def _release_of(version: str) -> tuple[int, int] | None:
    """pyslurm's version as the Slurm release it binds: ``24.11.0`` and ``26.5.1`` (pyslurm
    writes May releases without the zero) -> (24, 11), (26, 5); None if unreadable."""
    try:
        major, minor = version.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


class PyslurmReader(SlurmReader):
    """Jobs and nodes through pyslurm (one RPC each, in this process: no command started,
    no JSON written and read back), partitions still through ``scontrol show partition``
    (pyslurm 24.11.0's partition reader fails on Debian's 24.11.5 with an OverflowError).
    The records go through the same parser as the JSON reader's
    (:mod:`.pyslurm_records`). Only chosen by :func:`make_reader`."""

    def __init__(self, cli: SlurmCLI, module: Any, release: Release) -> None:
        super().__init__(cli, release)
        self.pyslurm = module

    def snapshot(self) -> Snapshot:
        try:
            raw_jobs = self.pyslurm.job().get()
            raw_nodes = self.pyslurm.node().get()
        except Exception as exc:    # pyslurm raises ValueError and its own RPCError
            raise SlurmError(f"pyslurm could not read the cluster: {exc}") from None
        head = meta(str(self.release))
        records, bad = [], []
        for key, d in raw_jobs.items():
            try:
                records.append(job_record(d))
            except (TypeError, ValueError, AttributeError, KeyError) as exc:
                bad.append(Skipped(f"job {key}", f"pyslurm record: {type(exc).__name__}: {exc}"))
        nodes = []
        for key, d in raw_nodes.items():
            try:
                nodes.append(node_record(d))
            except (TypeError, ValueError, AttributeError) as exc:
                bad.append(Skipped(f"node {key}", f"pyslurm record: {type(exc).__name__}: {exc}"))
        for b in bad:
            log.warning("skipped %s: %s", b.what, b.reason)
        snap = build_snapshot({"meta": head, "jobs": records}, {"meta": head, "nodes": nodes},
                              self.cli.run("scontrol", ["show", "partition", "-o"]))
        jobs = tuple(replace(j, alloc=self._allocation(raw_jobs.get(j.job_id), j))
                     for j in snap.jobs)
        return replace(snap, jobs=jobs, skipped=(*bad, *snap.skipped))

    @staticmethod
    def _allocation(d: object, job: SlurmJob) -> tuple[NodeAlloc, ...]:
        if not isinstance(d, Mapping):
            return ()
        try:
            return allocation(d, job)
        except (TypeError, ValueError) as exc:
            log.warning("job %s: its allocation %r is not readable (%s): counted by its "
                        "request", job.job_id, d.get("tres_alloc_str"), exc)
            return ()
