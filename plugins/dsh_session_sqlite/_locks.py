"""The lock a live session holds: an exclusive ``flock`` on a file of its own.

A database holds many sessions, and several processes may each write one of them, so
the lock is per session, not per database: ``<database>-locks/<session id>``. The
kernel drops it when its holder dies, so a crash leaves nothing to clean up but an
unlocked file, which the next holder takes over. Whoever holds the lock removes the
file when letting go; a taker checks it locked the file that is still at the path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from dsh_session import SessionInUseError, SessionWriteError

__all__ = ["SessionLock", "locks_of"]

_DIR_MODE = 0o700
_FILE_MODE = 0o600
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def locks_of(database: Path) -> Path:
    """The directory holding the lock files of the sessions of ``database``."""
    return database.with_name(f"{database.name}-locks")


class SessionLock:
    """The held lock of one session (see the module docstring)."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def take(cls, directory: Path, session_id: str) -> SessionLock:
        """Lock session ``session_id`` (an id already checked to be a plain name).

        Raises :class:`SessionInUseError` when a live session holds it (in this
        process or another), :class:`SessionWriteError` when the lock file cannot be
        made.
        """
        path = directory / session_id
        while True:
            try:
                directory.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
                fd = os.open(
                    path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, _FILE_MODE
                )
            except OSError as exc:
                raise SessionWriteError(f"cannot make the lock file {path}: {exc}") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise SessionInUseError(
                    f'session "{session_id}" is in use by a live session (in this process '
                    f"or another; its lock is {path})"
                ) from None
            held = os.fstat(fd)
            try:
                current = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                current = None
            if current is not None and (current.st_dev, current.st_ino) == (
                held.st_dev,
                held.st_ino,
            ):
                return cls(path, fd)
            os.close(fd)  # its holder removed it meanwhile: take the one at the path now

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file and let go of it (idempotent)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None

    def __repr__(self) -> str:
        return f"<SessionLock {self.path} ({'held' if self.held else 'released'})>"
