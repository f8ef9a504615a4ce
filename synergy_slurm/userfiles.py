"""Reading a file a user controls, from a process (the controller, often root) that must not
be fooled by it.

The controller reads files from places a user writes: a profiling job's spool directory
(handed to the user) and the progress directory (mode 1777). Whatever a user leaves there
is opened without following a link (``O_NOFOLLOW``: ``profile.json -> /etc/shadow`` is
refused, not read as root), without blocking (``O_NONBLOCK``: a FIFO would hang the round
for good), then checked on the open descriptor (``fstat``: a regular file, owned by the
job's user, so another user cannot plant it and a hard link to a root file is refused) and
read up to a cap (``/dev/zero`` or a sparse terabyte cannot exhaust memory).
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from pathlib import Path


class UserFileError(OSError):
    """The file is not one to read: missing, a link, not regular, someone else's, too big.
    The message names the reason, never the file's contents."""


# Flags every open of a user's file carries (O_NOCTTY: a terminal device never becomes
# the controller's controlling terminal).
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def open_user_file(path: str | Path, uid: int | None, dir_fd: int | None = None) -> int:
    """An open descriptor on ``path``, a regular file owned by ``uid`` (None: any owner,
    for files the controller itself made for a user it does not know); the caller closes
    it. Raises UserFileError with the reason."""
    try:
        fd = os.open(path, OPEN_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        why = "a link, not followed" if exc.errno == errno.ELOOP else exc.strerror
        raise UserFileError(f"{path}: not opened ({why})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserFileError(f"{path}: not a regular file")
        if uid is not None and st.st_uid != uid:
            raise UserFileError(f"{path}: owned by uid {st.st_uid}, not the job's user "
                                f"(uid {uid})")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_user_dir(path: str | Path, uid: int | None) -> int:
    """An open descriptor on directory ``path`` (not a link to one), owned by ``uid``: the
    files in it are then opened relative to it, so the directory cannot be swapped for
    another between the check and the reads."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UserFileError(f"{path}: not a directory, or a link ({exc.strerror})") from None
    st = os.fstat(fd)
    if uid is not None and st.st_uid != uid:
        os.close(fd)
        raise UserFileError(f"{path}: owned by uid {st.st_uid}, not the job's user "
                            f"(uid {uid})")
    return fd


def read_user_file(path: str | Path, uid: int | None, max_bytes: int,
                   dir_fd: int | None = None) -> bytes:
    """The whole of a user's file, refused (UserFileError) if it is over ``max_bytes``;
    FileNotFoundError where there is none."""
    fd = open_user_file(path, uid, dir_fd)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise UserFileError(f"{path}: {size} bytes, more than the {max_bytes} allowed")
        data = _read_at_most(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:         # grew between fstat and read
        raise UserFileError(f"{path}: more than the {max_bytes} bytes allowed")
    return data


def read_user_tail(path: str | Path, uid: int | None, max_bytes: int,
                   dir_fd: int | None = None) -> tuple[bytes, bool]:
    """The last ``max_bytes`` of a user's file, and whether that is less than the whole
    (its first line may then be cut)."""
    fd = open_user_file(path, uid, dir_fd)
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - max_bytes)
        os.lseek(fd, start, os.SEEK_SET)
        return _read_at_most(fd, max_bytes), start > 0
    finally:
        os.close(fd)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def user_uid(name: str) -> int | None:
    """The uid of user ``name`` on this host, None if there is no such user."""
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None
