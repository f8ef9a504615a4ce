"""A cluster saved to files and read back: what ``synergy controller snapshot`` writes and
``synergy controller replay`` plans on, with no Slurm behind it (:class:`.fake.FakeReader`).

The files are Slurm's own output, as the JSON reader reads it (``squeue --json``, the
nodes' JSON, ``scontrol show partition -o``, ``scontrol --version``, ``scontrol show
config``, and with accounting ``sacctmgr show qos|assoc``), so a snapshot taken at a site
can be replayed on any machine, attached to a report, or kept as a test's fixture. Nothing
in them is run or trusted beyond parsing: a malformed record is skipped with its reason,
as on a live read.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import BadInputError
from ..owndir import own_dir, write_file
from .commands import SlurmCLI, SlurmError
from .fake import FakeReader
from .parse import config_flags
from .reader import SlurmReader, build_snapshot, site_limits
from .release import Release

log = logging.getLogger(__name__)

JOBS, NODES, PARTITIONS = "squeue.json", "nodes.json", "partitions.txt"
VERSION, CONFIG, QOS, ASSOC = "version.txt", "config.txt", "qos.txt", "assoc.txt"
TAKEN = "taken.txt"              # when it was read (epoch seconds): the replay's clock
NEEDED = (VERSION, JOBS, NODES, PARTITIONS)


@dataclass(frozen=True)
class Saved:
    """A snapshot read back: a reader that gives it, and when it was taken (None: not
    recorded, e.g. files gathered by hand)."""

    reader: FakeReader
    taken_at: float | None


class SnapshotError(BadInputError):
    """A snapshot directory that cannot be replayed (missing or unreadable files)."""


def save(cli: SlurmCLI, where: Path) -> list[Path]:
    """Read the cluster once and write what Slurm printed into ``where`` (made if
    missing, only the caller may read it; an existing one must be the caller's own and
    writable by no one else: :func:`~synergy_slurm.owndir.own_dir`); returns the files
    written. Without accounting the limits are left out
    (logged): a replay then plans with partition limits only, as the controller would."""
    version = cli.run("scontrol", ["--version"])
    try:
        reader = SlurmReader(cli, Release.parse(version))   # the release, read once
    except ValueError as exc:
        raise SlurmError(f"cannot tell the Slurm release: {exc}") from None
    outputs = {TAKEN: f"{time.time():.0f}\n", VERSION: version}
    raw = reader.raw()
    outputs.update({JOBS: raw["jobs"], NODES: raw["nodes"], PARTITIONS: raw["partitions"],
                    CONFIG: cli.run("scontrol", ["show", "config"])})
    try:
        outputs[QOS], outputs[ASSOC] = reader.limits_raw()
    except SlurmError as exc:
        log.info("no accounting limits saved (%s)", exc)
    where = own_dir(where)     # made here (0700), or the caller's own: see ``owndir``
    written = []
    for name, text in outputs.items():
        path = where / name
        write_file(path, text, 0o600)     # every live job's name, user and comment
        written.append(path)
    return written


def load(where: Path) -> Saved:
    """The snapshot saved in ``where``."""
    missing = [n for n in NEEDED if not (where / n).is_file()]
    if missing:
        raise SnapshotError(f"{where}: no {', '.join(missing)} (a snapshot is what "
                            "'synergy controller snapshot DIR' writes)")
    texts = {name: _text(where / name) for name in (*NEEDED, CONFIG, QOS, ASSOC, TAKEN)
             if name in NEEDED or (where / name).is_file()}
    try:
        release = Release.parse(texts[VERSION])
    except ValueError as exc:
        raise SnapshotError(f"{where / VERSION}: {exc}") from None
    try:
        snap = build_snapshot(texts[JOBS], texts[NODES], texts[PARTITIONS])
    except (SlurmError, ValueError) as exc:
        raise SnapshotError(f"{where}: {exc}") from None
    contains = "Contain" in config_flags(texts.get(CONFIG, ""), "PrologFlags")
    limits = None
    if QOS in texts and ASSOC in texts:
        limits = site_limits(texts[QOS], texts[ASSOC])
    taken = None
    if TAKEN in texts:
        try:
            taken = float(texts[TAKEN])
        except ValueError:
            raise SnapshotError(f"{where / TAKEN}: not a time in epoch seconds") from None
    return Saved(FakeReader(snap, limits, release=str(release), contains=contains), taken)


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: {exc}") from None
