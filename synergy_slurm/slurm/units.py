"""Slurm's units, read in one place: memory sizes, durations and TRES lists.

Slurm writes sizes with a binary suffix (``4G``, ``612340K``) or none, and what a bare
number means depends on the command: MB where a request or an allocation is shown
(sbatch, scontrol, sacct's TRES, sacctmgr limits), bytes in usage records (sstat's and
sacct's TRESUsageIn*). Every reader of the adapter goes through these functions, so a
suffix or a case is never read one way here and another way there.
"""

from __future__ import annotations

import re

_SIZE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<u>[KMGTP]?)$", re.IGNORECASE)
_MB_PER_UNIT = {"B": 1 / 2**20, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2,
                "P": 1024.0**3}


def size_mb(value: str, bare: str = "M") -> float:
    """A size as MB: ``4G``, ``12.5M``, ``1232K``; a number without a suffix is in
    ``bare`` units ("M", or "B" for usage records). ValueError when it is not a size."""
    m = _SIZE.match(value.strip())
    if not m:
        raise ValueError(f"{value!r} is not a memory size")
    return float(m.group("n")) * _MB_PER_UNIT[(m.group("u") or bare).upper()]


def duration_s(value: str) -> float:
    """``[D-][HH:]MM:SS[.fff]`` (sacct's Elapsed and TotalCPU, sstat's cpu usage) or a
    bare number of seconds. ValueError when it is not a duration."""
    v = value.strip()
    days = 0
    if "-" in v:
        d, _, v = v.partition("-")
        if not d.isdigit():
            raise ValueError(f"{value!r} is not a duration")
        days = int(d)
    parts = v.split(":")
    if not 1 <= len(parts) <= 3:
        raise ValueError(f"{value!r} is not a duration")
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"{value!r} is not a duration") from None
    if any(x < 0 for x in nums):
        raise ValueError(f"{value!r} is not a duration")
    secs = 0.0
    for x in nums:
        secs = secs * 60 + x
    return days * 86400 + secs


def tres_items(value: str, strict: bool = False) -> dict[str, str]:
    """``cpu=6,mem=4G,gres/gpu=2`` -> {"cpu": "6", "mem": "4G", "gres/gpu": "2"}: names
    and values as written, blanks around them dropped. An item without ``=`` is skipped,
    or with ``strict`` a ValueError."""
    out: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        name, eq, v = item.partition("=")
        if not eq:
            if strict:
                raise ValueError(f"TRES item {item!r} has no '='")
            continue
        out[name.strip()] = v.strip()
    return out
