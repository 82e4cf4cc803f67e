"""The workspace side of a restore: read what a file holds, put bytes back, remove a
file and the directories a change created."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path

from ._blobs import write_atomic

__all__ = ["NotRegular", "digest_of", "missing_dirs", "read_current", "remove", "restore_bytes"]


class NotRegular(Exception):
    """Something other than a regular file is at the path."""


def read_current(path: str) -> bytes | None:
    """The bytes of the regular file ``path`` (None: no such file); :class:`NotRegular`
    for anything else there (a directory, a symlink, a FIFO): a restore leaves it."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(path)
    return Path(path).read_bytes()


def digest_of(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def missing_dirs(path: str) -> tuple[str, ...]:
    """The directories a write of ``path`` would create, outermost first."""
    missing: list[str] = []
    parent = os.path.dirname(path)
    while parent and not os.path.isdir(parent):
        missing.append(parent)
        up = os.path.dirname(parent)
        if up == parent:  # pragma: no cover - "/" always exists
            break
        parent = up
    return tuple(reversed(missing))


def restore_bytes(path: str, data: bytes) -> None:
    """Make ``data`` the content of ``path`` atomically, keeping its permissions."""
    target = Path(path)
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = target.stat().st_mode & 0o7777
    write_atomic(target, data)
    if mode is not None:
        os.chmod(target, mode)


def remove(path: str, dirs: tuple[str, ...]) -> None:
    """Remove the file ``path`` (gone already is fine), then each of ``dirs`` that is
    empty, innermost first."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    for directory in reversed(dirs):
        with contextlib.suppress(OSError):
            os.rmdir(directory)
