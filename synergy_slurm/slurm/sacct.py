"""A site's job history from the accounting database: ``sacct --json`` (22.05's plain
numbers and the newer ``{"set", "number"}`` objects alike) or ``sacct -P`` text with the
fields in :data:`TEXT_FIELDS`, the form for releases or exports without JSON.

A job is read from its allocation record; of its steps (an export without ``-X``: nested
in the job's JSON record, or the text form's ``123.batch`` lines) only the batch step is
read, for how Slurm laid out a job spread over several nodes (:attr:`HistoryJob.batch_node`).
Every record is parsed on its own; one that cannot be used becomes a :class:`Skipped`
with the reason, never an exception out of this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from ..vocabulary import GpuRequest, not_reshaped
from .commands import SlurmCLI, SlurmError
from .model import Skipped
from .parse import ParseError, accounting_state, expand_hostlist, num, obj, text
from .submit_line import request
from .units import size_mb, tres_items

# ``sacct -a -X -P -o <TEXT_FIELDS>``: what the text form must carry, in this order.
TEXT_FIELDS = ("JobIDRaw", "User", "Account", "Partition", "JobName", "Comment", "State",
               "Submit", "Eligible", "Start", "End", "AllocTRES", "ReqTRES", "NodeList", "QOS")
# After those, a header line may name any of these (in any order): Slurm's priority, the
# time limit Slurm planned the job with, and the admin comment (where synergy's hook tags
# the jobs it manages). Text without a header has TEXT_FIELDS alone.
OPTIONAL_FIELDS = ("Priority", "Timelimit", "AdminComment")
# What synergy asks sacct for.
PRIORITY_FIELDS = (*TEXT_FIELDS, *OPTIONAL_FIELDS)
# A window's history: every user (-a), every run of a requeued job (-D: its first
# submission is only in the first run's record). In JSON without -X, each job's steps come
# nested in its record (what it used: slurm.sacct_usage); the text form, for a sacct
# without --json, has allocations only (-X).
HISTORY_JSON_ARGS = ("-a", "-D", "--json")
HISTORY_TEXT_ARGS = ("-a", "-X", "-D", "-P", "-o", ",".join(PRIORITY_FIELDS))
_GPU_TYPED = re.compile(r"^gres/gpu:([\w.\-]+)$")
# A step's id in the text form (``123.batch``, ``123.extern``, ``123.0``, a het step's
# ``123.0+1``, an array task's ``5_1.batch`` as JobID shows it), and the batch step's.
_STEP = re.compile(r"^\d+(?:[_+]\d+)?\.[\w+-]+$")
_BATCH = re.compile(r"^(\d+)\.batch$")
T = TypeVar("T")


@dataclass(frozen=True)
class HistoryJob:
    """One job of the history. Times are epoch seconds; ``start``/``end`` None when the job
    never started / has not ended. ``gpus``/``cpus``/``mem_mb`` are what it was allocated
    (what it asked for when it never started); ``gpu_type`` the GPU type it asked for
    (``--gpus=h100:2``), where accounting tracks types, else None."""

    job_id: int
    user: str
    account: str
    partition: str
    name: str
    comment: str
    state: str
    submit: float
    eligible: float
    start: float | None
    end: float | None
    gpus: int
    cpus: int
    mem_mb: float
    gpu_type: str | None = None
    nodes: tuple[str, ...] = ()
    qos: str = ""
    # The priority Slurm recorded for it (0: not recorded); the replay starts jobs in this
    # order, as Slurm's multifactor priority did.
    priority: int = 0
    # Its time limit (None: unlimited or not recorded), what Slurm's backfill planned with.
    time_limit_s: float | None = None
    admin_comment: str = ""
    # Why synergy would leave its GPU request as submitted (a heterogeneous component, a
    # reservation, --gpus-per-task, ...: vocabulary.not_reshaped), as far as its record
    # tells (slurm/submit_line.py); "" when it would reshape it.
    unshaped: str = ""
    # How it asked for its GPUs, as far as its record tells (None: a record without the
    # submit line or with no GPUs; taken as the common --gres/--gpus-per-node form).
    request: GpuRequest | None = None
    # The command line it was submitted with, where accounting kept it (23.02 and later).
    submit_line: str = ""
    # (cores, GPUs) its batch step had on its node, where the export nests the steps
    # (read without -X); None where it does not.
    batch_node: tuple[int, int] | None = None

    @property
    def poorest_cores_per_gpu(self) -> float | None:
        """Cores per GPU on the poorest of its nodes, where it ran on several and its batch
        node shows them laid out unevenly (None: one node, even, or not recorded). Slurm
        does not split a ``--gpus`` job's cores by GPU: 22.05 gave a job of 24 cores and 8
        GPUs on two nodes 4 cores for the batch node's 4 GPUs and 20 for the other 4. A
        data-parallel job runs at its poorest node's pace. Exact on two nodes; on more, the
        batch node's or the others' mean, whichever is fewer."""
        if self.batch_node is None or len(self.nodes) < 2:
            return None
        cores, gpus = self.batch_node
        if not 0 < gpus < self.gpus or not 0 < cores < self.cpus:
            return None
        poorest = min(cores / gpus, (self.cpus - cores) / (self.gpus - gpus))
        return poorest if poorest < self.cpus / self.gpus - 1e-9 else None

    @property
    def started(self) -> bool:
        return self.start is not None

    @property
    def elapsed_s(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return max(0.0, self.end - self.start)


def read_history(cli: SlurmCLI, start: str, end: str) -> str:
    """A window's accounting records (``start``/``end`` as sacct -S/-E take them), as
    ``sacct --json`` gives them or, from a sacct without --json, its parsable text;
    ``parse_history`` reads either. Raises SlurmError when sacct fails."""
    try:
        return cli.run("sacct", [*HISTORY_JSON_ARGS, "-S", start, "-E", end])
    except SlurmError as exc:
        if "json" not in exc.stderr.lower():      # sacct's own words, not our arguments
            raise
        return cli.run("sacct", [*HISTORY_TEXT_ARGS, "-S", start, "-E", end])


def parse_history(raw: str) -> tuple[list[HistoryJob], list[Skipped]]:
    """``sacct --json`` output or ``sacct -P`` text (told apart by the first character)."""
    if raw.lstrip().startswith("{"):
        return parse_history_json(raw)
    return parse_history_text(raw)


# -- JSON --------------------------------------------------------------------------------
def parse_history_json(raw: str) -> tuple[list[HistoryJob], list[Skipped]]:
    return each_json_job(raw, _job_from_json)


def each_json_job(raw: str, read: Callable[[Mapping[str, Any]], T | None]
                  ) -> tuple[list[T], list[Skipped]]:
    """``read`` applied to each job record of ``sacct --json``; a record it cannot read
    (ValueError, TypeError, KeyError) is skipped with the reason, one it reads as None is
    left out. Raises ParseError only when the output is not sacct's JSON at all."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ParseError(f"sacct output is not JSON: {exc}") from None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("jobs"), list):
        raise ParseError("sacct JSON has no 'jobs' list")
    out: list[T] = []
    skipped: list[Skipped] = []
    for i, rec in enumerate(doc["jobs"]):
        what = f"job {rec.get('job_id', f'#{i}')}" if isinstance(rec, Mapping) else f"#{i}"
        try:
            if not isinstance(rec, Mapping):
                raise ValueError("not an object")
            got = read(rec)
        except (ValueError, TypeError, KeyError) as exc:
            skipped.append(Skipped(what, str(exc) or type(exc).__name__))
            continue
        if got is not None:
            out.append(got)
    return out, skipped


def id_and_times(rec: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]]:
    """A JSON job record's id and its ``time`` object; ValueError without them."""
    job_id = num(rec.get("job_id"))
    if job_id is None:
        raise ValueError("no job_id")
    t = rec.get("time")
    if not isinstance(t, Mapping):
        raise ValueError("no time record")
    return job_id, t


def _job_from_json(rec: Mapping[str, Any]) -> HistoryJob:
    job_id, t = id_and_times(rec)
    submit = num(t.get("submission"))
    if not submit:
        raise ValueError("no submission time")
    start = num(t.get("start")) or None
    end = num(t.get("end")) or None
    state = rec.get("state")
    current = accounting_state(state.get("current") if isinstance(state, Mapping) else state)
    tres = obj(rec.get("tres"))
    alloc = _tres_json(tres.get("allocated") or [])
    req = _tres_json(tres.get("requested") or [])
    used = alloc if alloc.get("gres/gpu") or alloc.get("cpu") else req
    used = {**used, **{f"asked:{k}": v for k, v in req.items() if _GPU_TYPED.match(k)}}
    comment = rec.get("comment")
    admin = rec.get("admin_comment")
    if isinstance(comment, Mapping):   # {"job", "administrator", "system"}
        admin = comment.get("administrator") or admin
        comment = comment.get("job")
    nodes = text(rec.get("nodes"))
    limit_min = num(t.get("limit"), None)
    het = obj(rec.get("het"))
    resv = obj(rec.get("reservation"))
    job = _job(job_id, text(rec.get("user")), text(rec.get("account")),
                text(rec.get("partition")), text(rec.get("name")), text(comment),
                current, submit, num(t.get("eligible")) or submit, start, end,
                used, nodes, text(rec.get("qos")), _priority(rec.get("priority")),
                limit_min * 60.0 if limit_min and limit_min > 0 else None, text(admin))
    job = _with_shape(job, text(rec.get("submit_line")), bool(num(het.get("job_id"), 0)),
                      text(resv.get("name")) not in ("", "0"))
    batch = _batch_json(rec.get("steps"))
    return replace(job, batch_node=batch) if batch is not None else job


def _batch_json(steps: Any) -> tuple[int, int] | None:
    """The batch step's (cores, GPUs) on its node, from a job's nested steps (``step.id``
    ``batch`` on 22.05, ``123.batch`` on 24.11 and later); None where there is no such
    step (an allocation from salloc, a het job's later component) or its TRES cannot be
    read."""
    if not isinstance(steps, list):
        return None
    for st in steps:
        step_id = text(obj(st.get("step")).get("id")) if isinstance(st, Mapping) else ""
        if step_id != "batch" and not step_id.endswith(".batch"):
            continue
        try:
            tres = _tres_json(obj(st.get("tres")).get("allocated") or [])
        except (ValueError, TypeError):
            return None
        return _cores_gpus(tres)
    return None


def _cores_gpus(tres: Mapping[str, float]) -> tuple[int, int] | None:
    cores = int(tres.get("cpu", 0))
    gpus = int(tres.get("gres/gpu", 0) or sum(v for k, v in tres.items()
                                              if _GPU_TYPED.match(k)))
    return (cores, gpus) if cores > 0 and gpus > 0 else None


def _with_shape(job: HistoryJob, submit_line: str, het: bool, reservation: bool
                ) -> HistoryJob:
    if submit_line:
        job = replace(job, submit_line=submit_line)
    if job.gpus <= 0 or not (submit_line or het or reservation):
        return job
    req = request(submit_line, job.gpus, max(1, len(job.nodes)), het, reservation)
    return replace(job, unshaped=not_reshaped(req) or "", request=req)


def _priority(value: Any) -> int:
    """sacct's priority: a number (22.05) or {"set", "infinite", "number"}; 0 if unset."""
    p = num(value, 0) or 0
    return p if 0 < p < 2 ** 32 - 2 else 0


def _tres_json(items: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    if not isinstance(items, list):
        raise ValueError("TRES is not a list")
    for it in items:
        if not isinstance(it, Mapping):
            raise ValueError("TRES entry is not an object")
        kind, name = text(it.get("type")), text(it.get("name"))
        key = f"{kind}/{name}" if name else kind
        if key not in ("cpu", "mem") and not key.startswith("gres/gpu"):
            continue        # energy, billing, node, licenses...: not ours (energy is -2)
        count = num(it.get("count"), 0) or 0
        if count < 0:
            raise ValueError(f"negative TRES count for {key}")
        out[key] = float(count)
    return out


# -- text --------------------------------------------------------------------------------
def parse_history_text(raw: str) -> tuple[list[HistoryJob], list[Skipped]]:
    """``sacct -a -X -P -o ...``: with a header line (``-n`` not given), the fields in any
    order, :data:`TEXT_FIELDS` required (``JobID`` may stand for ``JobIDRaw``), any of
    :data:`OPTIONAL_FIELDS` read, other columns ignored; without one, :data:`TEXT_FIELDS`
    in that order. Without ``-X``, a job's step lines follow it: the batch step's
    AllocTRES gives the job's :attr:`HistoryJob.batch_node`; other steps are not jobs and
    are passed over.

    sacct writes users' text (job name, comment, submit line) as it is: a newline in it
    splits a record over lines, and a ``|`` in it adds a field. A line with too few fields
    is joined with the next ones until the record is whole (so text after a newline can
    never pass for a record of its own), and a record with too many is read where exactly
    one free-text field can take the extra ``|`` (:func:`_placed`), else skipped with why.
    """
    out: list[HistoryJob] = []
    skipped: list[Skipped] = []
    fields: tuple[str, ...] = TEXT_FIELDS
    lines = raw.splitlines()
    top = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    head = lines[top].split("|") if top < len(lines) else [""]
    body = 0
    if {"JobID", "JobIDRaw", "Submit"} & {x.strip() for x in head} or \
            not head[0][:1].isdigit():
        fields, body = _header(head), top + 1
    at, tres_at = fields.index("JobIDRaw"), fields.index("AllocTRES")
    latest: dict[int, int] = {}                     # job id -> its last record in out
    for lineno, f in _records(lines, body, len(fields)):
        job_id = f[at].strip() if at < len(f) else ""
        if _STEP.match(job_id):     # a step (an export without -X), not a job
            batch = _BATCH.match(job_id)
            if batch and len(f) == len(fields) and int(batch[1]) in latest:
                i = latest[int(batch[1])]           # -D: the run listed just before
                out[i] = replace(out[i], batch_node=_batch_text(f[tres_at]))
            continue
        placed = _placed(f, fields)
        if isinstance(placed, str):
            skipped.append(Skipped(f"line {lineno} (job {f[0][:20]})", placed))
            continue
        try:
            out.append(_job_from_text(placed))
        except ValueError as exc:
            skipped.append(Skipped(f"line {lineno} (job {f[0][:20]})", str(exc)))
            continue
        latest[out[-1].job_id] = len(out) - 1
    return out, skipped


def _batch_text(alloc: str) -> tuple[int, int] | None:
    try:
        return _cores_gpus(_tres_text(alloc))
    except ValueError:
        return None


# The fields that hold users' text: where an extra '|' may sit.
FREE_TEXT = ("JobName", "Comment", "AdminComment", "SubmitLine")


def _records(lines: list[str], skip: int, width: int) -> Iterator[tuple[int, list[str]]]:
    """Each record's fields and its first line's number, from line ``skip`` on (0-based):
    lines joined (with the newline they lost) while they hold fewer than ``width``
    fields. A record still short at the end is yielded as it is."""
    buf: list[str] | None = None
    start = 0
    for lineno, line in enumerate(lines, start=1):
        if lineno <= skip:
            continue
        if buf is None:
            if not line.strip():
                continue
            buf, start = line.split("|"), lineno
        else:
            rest = line.split("|")
            buf = [*buf[:-1], buf[-1] + "\n" + rest[0], *rest[1:]]
        if len(buf) >= width:
            yield start, buf
            buf = None
    if buf is not None:
        yield start, buf


def _placed(f: list[str], fields: tuple[str, ...]) -> dict[str, str] | str:
    """The record's fields by name, or why it cannot be read: an extra '|' is put back
    into the one free-text field for which the whole record reads; none, or more than
    one, and the record is skipped."""
    n = len(fields)
    if len(f) == n:
        return dict(zip(fields, f, strict=True))
    if len(f) < n:
        return f"{len(f)} fields, expected {n} (the record is cut short)"
    extra = len(f) - n
    fits: list[tuple[str, dict[str, str]]] = []
    for name in FREE_TEXT:
        if name not in fields:
            continue
        c = fields.index(name)
        rec = dict(zip(fields, [*f[:c], "|".join(f[c:c + extra + 1]), *f[c + extra + 1:]],
                       strict=True))
        try:
            _job_from_text(rec)
        except ValueError:
            continue
        fits.append((name, rec))
    if len(fits) == 1:
        return fits[0][1]
    if not fits:
        return f"{len(f)} fields, expected {n}, and no text field can hold the extra '|'"
    return (f"a '|' inside {' or '.join(n for n, _ in fits)}: which one cannot be told "
            "(export with a delimiter no field holds: sacct --delimiter)")


def _header(names: list[str]) -> tuple[str, ...]:
    """The columns a header line names, ``JobID`` read as ``JobIDRaw``; a header that lacks
    a required field is refused, naming what is missing."""
    cols = tuple("JobIDRaw" if n == "JobID" and "JobIDRaw" not in names else n
                 for n in (x.strip() for x in names))
    missing = [n for n in TEXT_FIELDS if n not in cols]
    if missing or len(set(cols)) != len(cols):
        why = (f"lacks {','.join(missing)}" if missing else "names a field twice")
        raise ParseError(f"sacct text header {','.join(names)[:200]} {why}; export with "
                         f"-o {','.join(PRIORITY_FIELDS)}")
    return cols


def _job_from_text(r: dict[str, str]) -> HistoryJob:
    if not r["JobIDRaw"].isdigit():
        raise ValueError(f"job id {r['JobIDRaw']!r} is not a number (an array task or a "
                         "het component as JobID shows them: export JobIDRaw)")
    submit = _time(r["Submit"])
    if submit is None:
        raise ValueError("no submit time")
    alloc = _tres_text(r["AllocTRES"])
    req = _tres_text(r["ReqTRES"])
    used = alloc if alloc.get("gres/gpu") or alloc.get("cpu") else req
    used = {**used, **{f"asked:{k}": v for k, v in req.items() if _GPU_TYPED.match(k)}}
    job = _job(int(r["JobIDRaw"]), r["User"], r["Account"], r["Partition"], r["JobName"],
               r["Comment"], accounting_state(r["State"]), submit,
               _time(r["Eligible"]) or submit, _time(r["Start"]), _time(r["End"]), used,
               r["NodeList"], r["QOS"], _text_priority(r.get("Priority", "")),
               _duration(r.get("Timelimit", "")), r.get("AdminComment", ""))
    # Where a header names them (sacct -o ...,Reservation,SubmitLine).
    return _with_shape(job, r.get("SubmitLine", ""), False,
                       r.get("Reservation", "") not in ("", "(null)"))


def _duration(value: str) -> float | None:
    """sacct's Timelimit: [days-]hours:minutes:seconds, minutes:seconds or minutes;
    UNLIMITED, Partition_Limit and empty are None (no limit of its own recorded)."""
    v = value.strip()
    if v in ("", "UNLIMITED", "Partition_Limit", "INVALID", "NONE"):
        return None
    days, _, rest = v.rpartition("-")
    parts = rest.split(":")
    if not (days == "" or days.isdigit()) or not all(p.isdigit() for p in parts) \
            or not 1 <= len(parts) <= 3:
        raise ValueError(f"time limit {v!r} is not [days-]hours:minutes:seconds")
    nums = [int(p) for p in parts]
    if len(parts) == 1:
        secs = nums[0] * 60
    elif len(parts) == 2:
        secs = nums[0] * 60 + nums[1]
    else:
        secs = nums[0] * 3600 + nums[1] * 60 + nums[2]
    return float(secs + int(days or 0) * 86400) or None


def _text_priority(value: str) -> int:
    v = value.strip()
    if v in ("", "0"):
        return 0
    if not v.isdigit():
        raise ValueError(f"priority {v!r} is not a number")
    return _priority(int(v))


def _time(value: str) -> float | None:
    """sacct's local ISO time; "Unknown", "None" and empty are None."""
    v = value.strip()
    if v in ("", "Unknown", "None", "N/A"):
        return None
    try:
        return datetime.fromisoformat(v).timestamp()
    except ValueError:
        raise ValueError(f"time {v!r} is not ISO 8601") from None


def _tres_text(value: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, v in tres_items(value, strict=True).items():
        if key == "mem":
            out[key] = size_mb(v)
        else:
            try:
                out[key] = float(v)
            except ValueError:
                raise ValueError(f"TRES {key}={v!r} is not a number") from None
    return out


# -- both --------------------------------------------------------------------------------
def _job(job_id: int, user: str, account: str, partition: str, name: str, comment: str,
         state: str, submit: float, eligible: float, start: float | None, end: float | None,
         tres: dict[str, float], nodes: str, qos: str, priority: int = 0,
         time_limit_s: float | None = None, admin_comment: str = "") -> HistoryJob:
    if nodes.strip() in ("None assigned", "None"):
        # Never ran (e.g. cancelled while pending): Slurm records start = end = the cancel.
        start = end = None
        nodes = ""
    if start is not None and start < submit:
        raise ValueError("starts before it was submitted")
    if start is not None and end is not None and end < start:
        raise ValueError("ends before it started")
    typed = [m.group(1) for k in tres if (m := _GPU_TYPED.match(k))]
    gpus = int(tres.get("gres/gpu", 0) or sum(tres[f"gres/gpu:{t}"] for t in typed))
    # The type it asked for, where accounting tracks types (AccountingStorageTRES lists
    # gres/gpu:TYPE): its requested TRES name one; what it ran on says nothing of that.
    asked = [m.group(1) for k in tres if k.startswith("asked:")
             and (m := _GPU_TYPED.match(k[len("asked:"):]))]
    try:
        names = tuple(expand_hostlist(nodes)) if nodes else ()
    except ValueError:
        names = ()
    return HistoryJob(job_id, user, account, partition.split(",")[0], name, comment,
                      state.upper(), float(submit), float(min(max(eligible, submit),
                                                              start or eligible)),
                      None if start is None else float(start),
                      None if end is None else float(end), gpus, int(tres.get("cpu", 0)),
                      float(tres.get("mem", 0.0)), asked[0] if len(asked) == 1 else None,
                      names, qos, priority, time_limit_s, admin_comment)
