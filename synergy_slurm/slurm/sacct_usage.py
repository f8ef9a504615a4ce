"""What each job of a site's history really used, from its accounting records.

A site that never ran synergy already records a great deal: how much CPU time a job's steps
burned against the cores it held (TotalCPU against Elapsed x AllocCPUS), its steps' peak
resident memory against what it was given (MaxRSS, TRESUsageInMax / TRESUsageInTot), and,
where the site tracks ``gres/gpuutil`` and ``gres/gpumem``, its GPUs' use. Read from
``sacct --json`` (steps nested in their job: read without ``-X``) or ``sacct -P`` text
(one line per job and per step: JobIDRaw ``123``, ``123.batch``, ``123.0``), on 22.05,
24.11 and 26.05 alike.

A job's peak memory is the largest of its steps' (a step's total over its tasks where
recorded, else its largest task); its CPU time is its steps' sum. A field that is missing or
malformed leaves that measure unknown (None) and is counted with its reason; a record that
cannot be read at all is skipped with its reason. Nothing here raises on bad input.

CPU time and memory are checked against histories recorded on 22.05 and 26.05
(scripts/record/record_usage.py). The GPU fields follow Slurm's names (``gres/gpuutil`` in
TRESUsageInAve / the steps' average, ``gres/gpumem`` in TRESUsageInMax / their max, bytes in
JSON) but were never recorded here: the dev cluster's GPUs are fake and NVML-less.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .model import Skipped
from .parse import ParseError, num, obj, text
from .sacct import each_json_job, id_and_times
from .units import duration_s, size_mb, tres_items

# ``sacct -a -D -P -o <USAGE_FIELDS>`` (no -X): what the text form must carry.
USAGE_FIELDS = ("JobIDRaw", "Elapsed", "AllocCPUS", "TotalCPU", "MaxRSS", "TRESUsageInMax",
                "TRESUsageInTot")
_STEP = re.compile(r"^(\d+)(?:\.([\w+-]+))?$")


@dataclass(frozen=True)
class JobUsage:
    """One job's use over its run. ``cpu_s``: CPU seconds its steps burned; ``peak_mem_mb``:
    the largest resident memory of its steps; ``gpu_util``: its GPUs' mean utilisation (0-1)
    and ``gpu_mem_mb`` their peak memory, where the site tracks them; None: not recorded."""

    job_id: int
    elapsed_s: float
    alloc_cpus: int
    cpu_s: float | None = None
    peak_mem_mb: float | None = None
    gpu_util: float | None = None
    gpu_mem_mb: float | None = None

    @property
    def core_use(self) -> float | None:
        """The share of its cores it kept busy on average (0-1, more when it oversubscribed
        them); None when unknown or it ran no time on no cores."""
        if self.cpu_s is None or self.elapsed_s <= 0 or self.alloc_cpus <= 0:
            return None
        return self.cpu_s / (self.elapsed_s * self.alloc_cpus)


@dataclass
class UsageRead:
    """Every job's use, the records skipped, and the measures left unknown (by reason)."""

    jobs: dict[int, JobUsage] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    unknown: Counter[str] = field(default_factory=Counter)


def parse_usage(raw: str) -> UsageRead:
    """``sacct --json`` or ``sacct -P`` text (with a header naming USAGE_FIELDS)."""
    if raw.lstrip().startswith("{"):
        return parse_usage_json(raw)
    return parse_usage_text(raw)


# -- JSON -----------------------------------------------------------------------------------
def parse_usage_json(raw: str) -> UsageRead:
    out = UsageRead()
    jobs, out.skipped = each_json_job(raw, lambda rec: _json_job(rec, out.unknown))
    out.jobs = {j.job_id: j for j in jobs}
    return out


def _json_job(rec: Mapping[str, Any], unknown: Counter[str]) -> JobUsage | None:
    job_id, t = id_and_times(rec)
    elapsed = num(t.get("elapsed"), 0) or 0
    if elapsed <= 0:
        return None                      # never ran: nothing used
    tres = obj(rec.get("tres"))
    alloc = _tres_counts(tres.get("allocated"))
    cpus = int(alloc.get("cpu", 0))
    steps = rec.get("steps")
    if not isinstance(steps, list):
        steps = []
    cpu_s = _seconds(t.get("total"))
    if steps:
        per_step = [_seconds(s.get("time", {}).get("total")) for s in steps
                    if isinstance(s, Mapping) and isinstance(s.get("time"), Mapping)]
        known = [c for c in per_step if c is not None]
        if known:
            cpu_s = sum(known)
    if cpu_s is None:
        unknown["CPU time not recorded"] += 1
    peaks, util, gmem = [], [], []
    for s in steps:
        if not isinstance(s, Mapping) or not isinstance(s.get("tres"), Mapping):
            continue
        used = s["tres"].get("requested")
        if not isinstance(used, Mapping):
            continue
        most = _tres_counts(used.get("max"))
        total = _tres_counts(used.get("total"))
        mem = total.get("mem", most.get("mem"))
        if mem is not None:
            peaks.append(mem / 2**20)            # bytes
        if "gres/gpuutil" in (avg := _tres_counts(used.get("average"))):
            util.append(avg["gres/gpuutil"] / 100)
        if "gres/gpumem" in most:
            gmem.append(most["gres/gpumem"] / 2**20)
    if not peaks:
        unknown["peak memory not recorded (no step usage: read without -X, with "
                "JobAcctGatherType set)"] += 1
    return JobUsage(job_id, float(elapsed), cpus, cpu_s, max(peaks) if peaks else None,
                    max(util) if util else None, max(gmem) if gmem else None)


def _seconds(value: Any) -> float | None:
    """A ``{"seconds", "microseconds"}`` object (CPU time), None when absent."""
    if not isinstance(value, Mapping):
        return None
    try:
        s, us = num(value.get("seconds"), None), num(value.get("microseconds"), 0) or 0
    except ValueError:
        return None
    return None if s is None or s < 0 else s + us / 1e6


def _tres_counts(items: Any) -> dict[str, float]:
    """A TRES list (``[{"type": "mem", "name": "", "count": N}, ...]``) by ``type[/name]``;
    entries that cannot be read are left out."""
    out: dict[str, float] = {}
    if not isinstance(items, list):
        return out
    for it in items:
        if not isinstance(it, Mapping):
            continue
        kind, name = text(it.get("type")), text(it.get("name"))
        try:
            count = num(it.get("count"), None)
        except ValueError:
            continue
        if kind and count is not None and count >= 0:
            out[f"{kind}/{name}" if name else kind] = float(count)
    return out


# -- text -----------------------------------------------------------------------------------
def parse_usage_text(raw: str) -> UsageRead:
    lines = [ln for ln in raw.splitlines() if ln.strip()]
    if not lines:
        return UsageRead()
    names = lines[0].split("|")
    missing = [f for f in ("JobIDRaw", "Elapsed", "AllocCPUS") if f not in names]
    if missing:
        raise ParseError(f"sacct text has no {', '.join(missing)} column (a header line "
                         f"naming {', '.join(USAGE_FIELDS)} is needed)")
    out = UsageRead()
    rows: dict[int, dict[str, Any]] = {}
    for n, line in enumerate(lines[1:], start=2):
        cells = line.split("|")
        if len(cells) != len(names):
            out.skipped.append(Skipped(f"line {n}", f"{len(cells)} fields, the header has "
                                       f"{len(names)}"))
            continue
        r = dict(zip(names, cells, strict=True))
        m = _STEP.match(r["JobIDRaw"].strip())
        if not m:
            out.skipped.append(Skipped(f"line {n}", f"job id {r['JobIDRaw']!r}"))
            continue
        row = rows.setdefault(int(m[1]), {"steps": []})
        if m[2] is None:
            row["alloc"] = r
        else:
            row["steps"].append(r)
    for job_id, parts in rows.items():
        try:
            job = _text_job(job_id, parts, out.unknown)
        except ValueError as exc:
            out.skipped.append(Skipped(f"job {job_id}", str(exc)))
            continue
        if job is not None:
            out.jobs[job_id] = job
    return out


def _text_job(job_id: int, parts: Mapping[str, Any], unknown: Counter[str]
              ) -> JobUsage | None:
    alloc = parts.get("alloc")
    if alloc is None:
        raise ValueError("steps without their job's line")
    elapsed = _elapsed(alloc["Elapsed"])
    if elapsed is None:
        raise ValueError(f"Elapsed {alloc['Elapsed']!r}")
    if elapsed <= 0:
        return None
    cpus_text = alloc["AllocCPUS"].strip()
    if not cpus_text.isdigit():
        raise ValueError(f"AllocCPUS {cpus_text!r}")
    cpu_s = _elapsed(alloc.get("TotalCPU", "")) if "TotalCPU" in alloc else None
    if cpu_s is None:
        unknown["CPU time not recorded"] += 1
    peaks, util, gmem = [], [], []
    for s in parts["steps"]:
        total = _usage_map(s.get("TRESUsageInTot", ""))
        most = _usage_map(s.get("TRESUsageInMax", ""))
        mem = total.get("mem", most.get("mem"))
        if mem is None:
            mem = _size_mb(s.get("MaxRSS", ""))
        if mem is not None:
            peaks.append(mem)
        mean = _usage_map(s.get("TRESUsageInAve", ""))      # a column the header may add
        if "gres/gpuutil" in mean:
            util.append(mean["gres/gpuutil"] / 100)
        if "gres/gpumem" in most:
            gmem.append(most["gres/gpumem"])
    if not peaks:
        unknown["peak memory not recorded (no step usage: read without -X, with "
                "JobAcctGatherType set)"] += 1
    return JobUsage(job_id, elapsed, int(cpus_text), cpu_s, max(peaks) if peaks else None,
                    max(util) if util else None, max(gmem) if gmem else None)


def _usage_map(value: str) -> dict[str, float]:
    """TRESUsageIn* (``cpu=00:00:20,mem=612340K,gres/gpuutil=40``): memory-like values in
    MB, cpu in seconds, the rest as numbers; what cannot be read is left out."""
    out: dict[str, float] = {}
    for name, v in tres_items(value).items():
        if name == "cpu":
            got = _elapsed(v)
        elif name in ("mem", "vmem", "gres/gpumem"):
            got = _size_mb(v)
        else:
            try:
                got = float(v)
            except ValueError:
                got = None
        if got is not None:
            out[name] = got
    return out


def _size_mb(value: str) -> float | None:
    """``612340K``, ``1.50G``, ``123`` (bytes) as MB; None when empty or unreadable."""
    try:
        return size_mb(value, bare="B")
    except ValueError:
        return None


def _elapsed(value: str) -> float | None:
    """sacct's ``[D-][HH:]MM:SS[.fff]`` as seconds; None when empty or unreadable."""
    try:
        return duration_s(value)
    except ValueError:
        return None
