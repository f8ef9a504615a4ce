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
    merged, _, problems = with_owners(file_profiles, store)
    return merged, problems


def with_owners(file_profiles: Mapping[str, Profile], store: str | Path
                ) -> tuple[dict[str, Profile], dict[str, str], list[str]]:
    """:func:`with_store`, and who each profile measured for a user belongs to (slot ->
    user; the others are site-wide)."""
    merged = dict(file_profiles)
    owners: dict[str, str] = {}
    problems: list[str] = []
    if Path(store).exists():
        try:
            st = ProfileStore(store, readonly=True)
            merged.update(st.all())
            owners = st.owners()
        except (sqlite3.Error, ProfileError, ValueError) as exc:
            problems.append(f"profile store {store}: {exc}")
    return merged, owners, problems


def trusted(profiles: Mapping[str, Profile], owners: Mapping[str, str], user: str | None,
            trust: str) -> dict[str, Profile]:
    """The profiles that may shape ``user``'s jobs under ``[profiles] trust``: ``all``
    of them, the site-wide ones and ``user``'s own (``own``), or the site-wide ones only
    (``site``; also what ``own`` gives where the user is not known: the hook's table)."""
    if trust == "all":
        return dict(profiles)
    return {slot: p for slot, p in profiles.items()
            if not owners.get(slot) or (trust == "own" and owners[slot] == user)}
