"""The profile store: SQLite, keyed by a fingerprint.

A fingerprint is the user's profile key when given (``synergy-sbatch --profile-key``), else
derived from model, batch size, dataset and GPU count. Only complete profiles are stored:
a profiling run that failed or ran out of budget stores nothing.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ..core import Profile, profiles_from_doc, profiles_to_doc
from ..core.profile import GPU_TYPE_RE
from ..dbfile import DatabaseError, connect, has_table
from ..vocabulary import KEY_RE

# The entry of a result file (``synergy profile run --out``) that says what profiling cost.
RESULT_META = "_synergy_result"


def fingerprint(key: str | None = None, model: str = "", batch_size: int | None = None,
                dataset: str = "", gpus: int = 1) -> str:
    """The store key: the user's key if valid, else ``model:b<batch>:<dataset>:g<gpus>``."""
    if key:
        if not KEY_RE.match(key):
            raise ValueError(f"bad profile key {key!r}: use 1-64 of A-Z a-z 0-9 _ . : -")
        return key
    if not model:
        raise ValueError("give a profile key or at least a model name")
    parts = [model, f"b{batch_size}" if batch_size else "", dataset, f"g{gpus}"]
    fp = ":".join(re.sub(r"[^A-Za-z0-9_.\-]", "-", p) for p in parts if p)[:64]
    return fp


class ProfileOwned(ValueError):
    """A user's measurement would replace a site-wide or another user's profile."""


@dataclass(frozen=True)
class StoredProfile:
    profile: Profile
    measured_points: int
    profiling_cpu_s: float
    created: float
    source: str
    owner: str = ""      # the user it was measured for ("" site-wide)

    def show(self) -> dict:
        p = self.profile
        points = [{"cpus_per_gpu": c, "mem_gb_per_gpu": m, "throughput": p.throughput[i][j]}
                  for i, c in enumerate(p.cpu_grid) for j, m in enumerate(p.mem_grid)]
        return {"key": p.key, "gpu_type": p.gpu_type or None, "points": points,
                "measured_points": self.measured_points,
                "profiling_cpu_s": round(self.profiling_cpu_s, 3),
                "ideal": {"cpus_per_gpu": p.ideal.cpus, "mem_gb_per_gpu": p.ideal.mem_gb}
                if p.ideal else None,
                "iter_time_s_at_proportional": p.iter_time_s, "source": self.source,
                "owner": self.owner or None}


class ProfileStore:
    def __init__(self, path: str | Path, readonly: bool = False) -> None:
        """``readonly``: for commands that only look; the file must exist, nothing is
        created (an empty database reads as an empty store)."""
        self.path = Path(path)
        self.db = connect(path, readonly=readonly)
        try:
            if readonly:
                self._empty = not has_table(self.db, "profiles")
            else:
                self._empty = False
                self.db.execute(
                    "CREATE TABLE IF NOT EXISTS profiles (key TEXT PRIMARY KEY, doc TEXT "
                    "NOT NULL, measured_points INTEGER, profiling_cpu_s REAL, created REAL, "
                    "source TEXT, owner TEXT NOT NULL DEFAULT '')")
                if "owner" not in self._columns():   # a store of an earlier version
                    self.db.execute("ALTER TABLE profiles ADD COLUMN owner TEXT NOT NULL "
                                    "DEFAULT ''")
            self._owned = not self._empty and "owner" in self._columns()
        except sqlite3.Error as exc:
            raise DatabaseError(f"{self.path}: {exc}") from None

    def _columns(self) -> set[str]:
        return {r[1] for r in self.db.execute("PRAGMA table_info(profiles)")}

    def put(self, profile: Profile, measured_points: int = 0, profiling_cpu_s: float = 0.0,
            source: str = "import", owner: str = "") -> None:
        """Stored under its slot: the key, or ``KEY@TYPE`` for a profile measured on a GPU
        type, beside that key's profiles for other types. ``owner``: the user it was
        measured for ("" site-wide: the admin's imports and runs). A user's measurement
        replaces only that user's own profile: a site-wide one or another user's raises
        ProfileOwned, so no user can plant numbers that shape someone else's jobs. A
        site-wide profile (an admin's) replaces whatever the slot held."""
        if not KEY_RE.match(profile.key):
            raise ValueError(f"bad profile key {profile.key!r}")
        doc = json.dumps(profiles_to_doc({profile.slot: profile}))
        self.db.execute("BEGIN IMMEDIATE")      # the check and the write as one
        try:
            held = self._owner_of(profile.slot)
            if owner and held is not None and held != owner:
                raise ProfileOwned(
                    f"profile {profile.slot} is " + ("site-wide" if held == "" else
                                                     "measured for another user")
                    + ": a user's measurement does not replace it (choose another "
                    "profile key, or ask an admin to import one)")
            self.db.execute("INSERT OR REPLACE INTO profiles (key, doc, measured_points, "
                            "profiling_cpu_s, created, source, owner) VALUES "
                            "(?, ?, ?, ?, ?, ?, ?)",
                            (profile.slot, doc, measured_points, profiling_cpu_s,
                             time.time(), source, owner))
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _owner_of(self, slot: str) -> str | None:
        """Who the stored profile of ``slot`` belongs to ("" site-wide), None: none."""
        owner = "owner" if self._owned else "''"
        row = self.db.execute(f"SELECT {owner} FROM profiles WHERE key = ?",
                              (slot,)).fetchone()
        return None if row is None else (row[0] or "")

    def get(self, slot: str) -> StoredProfile | None:
        """The profile stored as ``slot`` (``KEY`` or ``KEY@TYPE``)."""
        if self._empty:
            return None
        owner = "owner" if self._owned else "''"
        row = self.db.execute("SELECT doc, measured_points, profiling_cpu_s, created, source, "
                              f"{owner} FROM profiles WHERE key = ?", (slot,)).fetchone()
        if row is None:
            return None
        prof = profiles_from_doc(json.loads(row[0]))[slot]
        return StoredProfile(prof, row[1] or 0, row[2] or 0.0, row[3], row[4] or "",
                             row[5] or "")

    def owners(self) -> dict[str, str]:
        """Slot -> the user it was measured for, for the profiles measured for a user."""
        if self._empty or not self._owned:
            return {}
        return {r[0]: r[1] for r in self.db.execute(
            "SELECT key, owner FROM profiles WHERE owner != ''")}

    def list_keys(self) -> list[str]:
        if self._empty:
            return []
        return [r[0] for r in self.db.execute("SELECT key FROM profiles ORDER BY key")]

    def all(self) -> dict[str, Profile]:
        out: dict[str, Profile] = {}
        if self._empty:
            return out
        for (doc,) in self.db.execute("SELECT doc FROM profiles"):
            out.update(profiles_from_doc(json.loads(doc)))
        return out

    def import_doc(self, doc: Mapping) -> list[str]:
        profiles = profiles_from_doc(doc)
        for p in profiles.values():
            self.put(p, source="import")
        return sorted(profiles)

    def export_doc(self, keys: list[str] | None = None) -> dict:
        allp = self.all()
        missing = sorted(set(keys or ()) - set(allp))
        if missing:
            raise ValueError(f"{self.path}: no profile {', '.join(missing)}")
        chosen = {k: v for k, v in allp.items() if keys is None or k in keys}
        grids = {(p.cpu_grid, p.mem_grid) for p in chosen.values()}
        if len(grids) > 1:
            raise ValueError("profiles on different grids: export them separately (--key)")
        return profiles_to_doc(chosen)

    def import_result(self, doc: Mapping, key: str, source: str, gpu_type: str = "",
                      owner: str = "") -> StoredProfile:
        """Store a ``profile run --out`` result for ``key``, measured on ``gpu_type`` (the
        type of the node it ran on, "" where Slurm names none); raises ValueError (or
        ProfileError, ProfileOwned) for anything but exactly one complete profile of that
        key that ``owner`` may store."""
        prof, points, cpu_s = parse_result(doc, key, gpu_type)
        self.put(prof, measured_points=points, profiling_cpu_s=cpu_s, source=source,
                 owner=owner)
        stored = self.get(prof.slot)
        assert stored is not None
        return stored


def parse_result(doc: object, key: str, gpu_type: str = "") -> tuple[Profile, int, float]:
    """The profile of a ``profile run --out`` result, its measured points and what
    profiling cost; ValueError (or ProfileError) for anything but exactly one complete
    profile of ``key``."""
    if not isinstance(doc, Mapping):
        raise ValueError("a result file must be a JSON object")
    meta = doc.get(RESULT_META)
    if not isinstance(meta, Mapping):
        raise ValueError(f"no {RESULT_META} entry: not a complete profiling result")
    points, cpu_s = meta.get("measured_points"), meta.get("profiling_cpu_s")
    if not (isinstance(points, int) and 1 <= points <= 64):
        raise ValueError(f"bad measured_points {points!r}"[:80])
    if not (isinstance(cpu_s, int | float) and 0 <= cpu_s < 1e9):
        raise ValueError(f"bad profiling_cpu_s {cpu_s!r}"[:80])
    profiles = profiles_from_doc({k: v for k, v in doc.items() if k != RESULT_META})
    if set(profiles) != {key}:
        raise ValueError(f"expected exactly the profile {key!r}, got {len(profiles)} others")
    if gpu_type and not GPU_TYPE_RE.match(gpu_type):
        raise ValueError(f"bad GPU type {gpu_type!r}")
    return replace(profiles[key], gpu_type=gpu_type), points, float(cpu_s)
