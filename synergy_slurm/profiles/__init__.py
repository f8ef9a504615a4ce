"""Profiles: the store (SQLite), fingerprints, the analytical memory model, and reading
profile files (the core only takes documents: it reads no file)."""

from .files import load_profiles

__all__ = ["load_profiles"]
