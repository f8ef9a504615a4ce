"""Profiles: the store (SQLite), fingerprints, and the analytical memory model."""
