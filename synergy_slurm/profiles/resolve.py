"""Which profiles are known: the profiles file, then the store, whose measured profiles win.
One rule for the controller (every round), the hook's table (`synergy hook export`),
explain (on a login node) and whatif, each of which says what it used."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..core import Profile, ProfileError
from .files import load_profiles
from .store import ProfileStore

# Where a resolved profile comes from (``Resolved.sources``): the profile store, the
# site's ``[profiles] file``, or that file being the paper's profiles shipped with synergy.
STORE, FILE, SHIPPED = "store", "file", "shipped"


@dataclass(frozen=True)
class Resolved:
    """The profiles a configuration knows, whose each measured one is (slot -> user), and
    where they came from."""

    profiles: dict[str, Profile]
    owners: dict[str, str]
    from_file: int
    from_store: int
    file: str
    store: str
    problems: tuple[str, ...] = ()
    # slot -> STORE, FILE or SHIPPED: where the profile in use comes from.
    sources: dict[str, str] = field(default_factory=dict)

    def used_by(self, slot: str, trust: str) -> str:
        """Who this profile shapes: the hook's table holds what may shape anyone's job
        (``trusted(..., None, trust)``); a profile measured for one user shapes only that
        user's jobs, in the controller's rounds, unless ``trust = "all"``."""
        owner = self.owners.get(slot)
        if not owner or trust == "all":
            return "everyone (hook and controller)"
        if trust == "own":
            return f"{owner}'s jobs only (controller; not in the hook's table)"
        return f"nobody ([profiles] trust = \"site\": measured for {owner})"

    def describe(self) -> str:
        parts = [f"file {self.file}: {self.from_file}" if self.file else "no [profiles] file",
                 f"store {self.store}: {self.from_store}" if Path(self.store).exists()
                 else f"no store at {self.store}"]
        return (f"{len(self.profiles)} profiles ({'; '.join(parts)}; the store's win over "
                "the file's)")


def configured(file: str, store: str | Path, shipped: Path | None = None) -> Resolved:
    """The configuration's profiles: ``[profiles] file`` (if set) overlaid with the store's
    (if it exists); every problem met is named, none raised. ``shipped``: the profiles
    shipped with synergy (``shipped.SHIPPED_PROFILES``, which this package may not
    import), for ``sources`` to name them where the file is that one."""
    problems: list[str] = []
    base: dict[str, Profile] = {}
    if file:
        try:
            base = load_profiles(file)
        except (OSError, ProfileError) as exc:
            problems.append(f"profiles file {file}: {exc}")
    merged, owners, more = with_owners(base, store)
    from_file = SHIPPED if file and shipped and _same_file(file, shipped) else FILE
    sources = {k: from_file if base.get(k) is p else STORE for k, p in merged.items()}
    stored = sum(1 for v in sources.values() if v == STORE)
    return Resolved(merged, owners, len(base), stored, file, str(store), (*problems, *more),
                    sources)


def _same_file(a: str | Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


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
