"""The lock a live session holds: an exclusive ``flock`` on a file of its own.

A database holds many sessions, and several processes may each write one of them, so
the lock is per session, not per database: ``<database>-locks/<session id>``. The
kernel drops it when its holder dies, so a crash leaves nothing to clean up but an
unlocked file, which the next holder takes over. Whoever holds the lock removes the
file when letting go; a taker checks it locked the file that is still at the path.

Leased writers (``sessions.lease``) hold the lock shared with each other: their lease
epoch, checked in every commit's transaction, orders them; a plain writer's exclusive
lock still keeps them out, and theirs keeps it out. The last shared holder to let go
(the one that can turn its lock exclusive) removes the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from dsh_session import SessionWriteError, lock_or_in_use

__all__ = ["SessionLock", "locks_of"]

_DIR_MODE = 0o700
_FILE_MODE = 0o600
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def locks_of(database: Path) -> Path:
    """The directory holding the lock files of the sessions of ``database``."""
    return database.with_name(f"{database.name}-locks")


class SessionLock:
    """The held lock of one session (see the module docstring)."""

    __slots__ = ("_fd", "path", "shared")

    def __init__(self, path: Path, fd: int, shared: bool = False) -> None:
        self.path = path
        self._fd: int | None = fd
        self.shared = shared

    @classmethod
    def take(cls, directory: Path, session_id: str, shared: bool = False) -> SessionLock:
        """Lock session ``session_id`` (an id already checked to be a plain name),
        exclusively or ``shared`` (a leased writer).

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
            in_use = (
                f'session "{session_id}" is in use by a live session (in this process '
                f"or another; its lock is {path})"
            )
            lock_or_in_use(fd, shared, in_use)
            held = os.fstat(fd)
            try:
                current = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                current = None
            if current is not None and (current.st_dev, current.st_ino) == (
                held.st_dev,
                held.st_ino,
            ):
                return cls(path, fd, shared)
            os.close(fd)  # its holder removed it meanwhile: take the one at the path now

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file and let go of it (idempotent); a shared holder removes
        it only when no other holder is left."""
        fd = self._fd
        if fd is None:
            return
        self._fd = None
        if self.shared:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # another leased writer still holds it
                return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(fd)

    def __repr__(self) -> str:
        return f"<SessionLock {self.path} ({'held' if self.held else 'released'})>"
