"""Directories an admin tool writes into, made so that no other user can steer the writes.

An admin runs ``synergy controller snapshot /tmp/snap``, ``synergy whatif --report ...``,
the demo or the dev cluster as root. Had another user made that directory first (or
planted a symlink there, or under a parent they own), root would write through the user's
links: overwrite a file of the user's choosing, or hand them the snapshot. So a tool's
output directory is:

- made here with an exclusive ``mkdir`` (its mode set then), or, where it already exists,
  a real directory (not a link) owned by the caller that no one else may write to;
- reached through parents that are real directories (or links) owned by root or the
  caller, each writable by others only with the sticky bit (as ``/tmp``), so that no
  other user can rename or swap anything on the way;

and its files are opened without following links (``O_NOFOLLOW``). What this refuses is
an :class:`UnsafeDirectory`, an input error naming the path and why.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import BadInputError


class UnsafeDirectory(BadInputError):
    """A directory another user could steer writes in (or that is not a directory)."""


def own_dir(path: str | Path, mode: int = 0o700) -> Path:
    """``path`` as a directory only the caller controls: made (with its missing parents,
    each checked the same way) with ``mode``, or an existing one that passes
    :func:`check_own_dir`. Returns the path, absolute (links in it are not resolved)."""
    p = Path(os.path.abspath(path))
    check_parents(p)
    missing = []
    probe = p
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            check_own_dir(d)      # made meanwhile: only if it passes as an existing one
            continue
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchmod(fd, mode)   # the mode asked for, whatever the umask
        finally:
            os.close(fd)
        check_own_dir(d)
    check_own_dir(p)
    return p


def check_target(path: str | Path) -> None:
    """What :func:`own_dir` would refuse, found before any work (a command checks its
    output directory before it reads Slurm or replays a history); creates nothing."""
    p = Path(os.path.abspath(path))
    check_parents(p)
    if os.path.lexists(p):
        check_own_dir(p)


def check_own_dir(path: Path) -> None:
    """Refuse ``path`` unless it is a real directory owned by the caller (or root) that
    neither its group nor others may write to."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise UnsafeDirectory(f"{path}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeDirectory(f"{path} is a symbolic link: choose a directory of your own")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectory(f"{path} exists and is not a directory")
    if st.st_uid not in (os.geteuid(), 0):
        raise UnsafeDirectory(f"{path} belongs to uid {st.st_uid}, not to you: another "
                              "user made it; choose a directory of your own")
    if st.st_mode & 0o022:
        raise UnsafeDirectory(f"{path} may be written by its group or others (mode "
                              f"{st.st_mode & 0o777:o}): choose a directory of your own")


def check_parents(path: Path) -> None:
    """Refuse a path whose existing parents another user could change: each must belong to
    root or the caller, and be writable by others only with the sticky bit."""
    for parent in reversed(path.parents):
        try:
            st = os.lstat(parent)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UnsafeDirectory(f"{parent}: {exc.strerror}") from None
        if st.st_uid not in (os.geteuid(), 0):
            raise UnsafeDirectory(f"{path}: its parent {parent} belongs to uid "
                                  f"{st.st_uid}: choose a directory of your own")
        if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022 \
                and not st.st_mode & stat.S_ISVTX:
            raise UnsafeDirectory(f"{path}: its parent {parent} may be written by others "
                                  f"(mode {st.st_mode & 0o777:o}, not sticky)")


def write_file(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Write ``path`` (in a directory from :func:`own_dir`) without following a link
    where the file should be: a link there is refused, never written through."""
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
