"""Releasing the jobs the hook held, once: what the controller does when it stops and what
``synergy hook failsafe`` does when the controller is gone (its table stale). Only the
hook's holds: an admin's or a user's hold on a job synergy held and released before is
left alone (its tag is cleared on release, see ``SlurmWriter.release_own``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..slurm.commands import SlurmError
from ..slurm.ports import Reader, Writer
from ..slurm.writer import NotEnforcing

log = logging.getLogger(__name__)


@dataclass
class Releases:
    held: list[int] = field(default_factory=list)          # held by synergy when read
    released: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)   # job id -> why


def release_held(reader: Reader, writer: Writer, dry_run: bool = False) -> Releases:
    """Release every job the hook held (with ``dry_run`` only list them). Raises
    SlurmError when Slurm cannot be read; a job that cannot be released is reported and
    the others are still released."""
    mine = [j for j in reader.snapshot().jobs if j.held_by_synergy]
    out = Releases(held=[j.job_id for j in mine])
    if dry_run:
        return out
    for job in mine:
        job_id = job.job_id
        try:
            writer.release_own(job)
            out.released.append(job_id)
        except (SlurmError, NotEnforcing) as exc:
            log.error("could not release %d: %s", job_id, exc)
            out.failed[job_id] = str(exc)
    return out
