"""Shared fixtures: where the read-only reference data lives (never copied into the repo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """``../shared`` beside the checkout, or $SYNERGY_SHARED."""
    env = os.environ.get("SYNERGY_SHARED")
    return Path(env) if env else REPO.parent / "shared"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    ref = shared_dir() / "reference"
    if not (ref / "model_profiles.json").exists():
        pytest.fail(f"reference data not found at {ref} (set SYNERGY_SHARED)")
    return ref


@pytest.fixture(scope="session")
def paper_profiles(reference_dir: Path):
    from synergy_slurm.core import load_profiles

    return load_profiles(reference_dir / "model_profiles.json")
