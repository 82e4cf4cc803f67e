"""Sweeping what a crash during session creation left: temporary files nobody holds
and the session directories left empty by removing them."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ._format import FILE_NAME

__all__ = ["sweep_stale"]

#: A temporary file younger than this may still be in the hands of its creator, which
#: takes its lock only just after creating it.
_STALE_SECONDS = 10.0


def _stale(path: Path, now: float) -> bool:
    """Whether the temporary file ``path`` was left by a creator that died: old enough,
    and nobody holds its lock."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if now - os.fstat(fd).st_mtime < _STALE_SECONDS:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its creator is still writing it
        return True
    finally:
        os.close(fd)


def sweep_stale(root: Path, now: float) -> list[Path]:
    """Remove what a crash during session creation left under ``root``: temporary
    files nobody holds, then the session directories left empty by that. Returns the
    removed paths; a missing or unreadable root sweeps nothing."""
    removed: list[Path] = []
    try:
        directories = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed
    for directory in directories:
        with contextlib.suppress(OSError):
            for tmp in directory.glob(f".{FILE_NAME}.*.tmp"):
                if _stale(tmp, now):
                    tmp.unlink()
                    removed.append(tmp)
            if not any(directory.iterdir()):
                directory.rmdir()
                removed.append(directory)
    return removed
