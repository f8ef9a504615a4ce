"""Opening synergy's SQLite files (the profile store, the controller's state) the same way
everywhere: errors that name the file, and read-only opens for commands that only look.

A read-only open creates nothing (no directory, no database, no WAL files of its own) and
works for any user who may read the file, which is what ``synergy status`` and ``synergy
profile list`` need on a login node.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from .errors import BadInputError


class DatabaseError(BadInputError):
    """A database file that is missing, unreadable or not ours; the message names it."""


def connect(path: str | Path, readonly: bool = False) -> sqlite3.Connection:
    """A connection to ``path`` (``:memory:`` allowed). Writable opens make the parent
    directory; read-only opens need the file to exist."""
    p = Path(path)
    memory = str(path) == ":memory:"
    try:
        if readonly:
            if not p.is_file():
                raise DatabaseError(f"{p}: no such database")
            db = _open_readonly(p)
        else:
            if not memory:
                p.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(p), timeout=30, isolation_level=None,
                                 check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.Error as exc:
        raise DatabaseError(f"{p}: {exc}") from None
    except OSError as exc:
        raise DatabaseError(f"{p}: {exc.strerror or exc}") from None


def _open_readonly(p: Path) -> sqlite3.Connection:
    """Read-only, also where the reader may not write the directory, and creating nothing
    where it may (root). While the writer (the controller) has the database open, its WAL
    index files exist and a read-only connection shares them. Once it has closed it, they
    are gone, and SQLite would make them for a reader that may write the directory (root
    ran ``synergy status`` and left ``state.db-wal`` and ``-shm`` behind, root's, beside
    the controller's state): then the file is read as immutable (nobody is writing it;
    every change was checkpointed into it when the writer closed)."""
    uri = f"file:{quote(str(p.resolve()))}?mode=ro"
    wal = [p.with_name(p.name + s) for s in ("-wal", "-shm")]
    if all(w.exists() for w in wal):
        db = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None,
                             check_same_thread=False)
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError as exc:
            if "readonly" not in str(exc) and "unable to open" not in str(exc):
                raise
            db.close()
    return sqlite3.connect(uri + "&immutable=1", uri=True, isolation_level=None,
                           check_same_thread=False)


def has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (name,)).fetchone() is not None
