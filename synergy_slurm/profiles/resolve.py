"""Which profiles are known: the profiles file, then the store, whose measured profiles win.
One rule for the controller (every round) and for explain (on a login node)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path

from ..core import Profile, ProfileError
from .store import ProfileStore


def with_store(file_profiles: Mapping[str, Profile], store: str | Path
               ) -> tuple[dict[str, Profile], list[str]]:
    """The file's profiles overlaid with the store's (read-only; a missing store adds
    nothing), and the problems met, each naming the store."""
    merged = dict(file_profiles)
    problems: list[str] = []
    if Path(store).exists():
        try:
            merged.update(ProfileStore(store, readonly=True).all())
        except (sqlite3.Error, ProfileError, ValueError) as exc:
            problems.append(f"profile store {store}: {exc}")
    return merged, problems
