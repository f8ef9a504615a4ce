"""Reading a ``model_profiles.json``-shaped file into profiles (outside the pure core)."""

from __future__ import annotations

import json
from pathlib import Path

from ..core import Profile, ProfileError, profiles_from_doc


def load_profiles(path: str | Path) -> dict[str, Profile]:
    """Every model of a ``model_profiles.json``-shaped file; ProfileError names the file."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProfileError(f"cannot read profiles from {path}: {exc}") from exc
    try:
        return profiles_from_doc(doc)
    except ProfileError as exc:
        raise ProfileError(f"{path}: {exc}") from None
