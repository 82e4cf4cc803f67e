"""Writer leases of the JSONL store: each session's epoch in ``<root>/<id>/lease``.

The file holds the epoch as decimal text (``3\\n``), changed in place, never replaced:
its ``flock`` is what orders a lease's change against the commits of leased writers. A
taker raises the epoch under the lock; a leased writer, under the same lock, reads the
epoch and writes its records only when the epoch is still its own. The lock is held for
one commit at a time, so a taker waits for at most one write of the writer it fences.

On shared storage (NFS, say) ``flock`` is carried out as a lock of the file server, so
the rule holds across machines as long as the storage honours locks and ``fsync``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from dsh_session import Lease, SessionReadError, SessionWriteError

from ._format import FILE_NAME

__all__ = ["LEASE_FILE", "LeaseFile", "fsync_dir"]

#: The lease of a session, inside ``<root>/<session id>/``.
LEASE_FILE = "lease"

_DIR_MODE = 0o700
_FILE_MODE = 0o600
_MAX_BYTES = 32
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class LeaseFile:
    """The lease file of one session, and the lease this process holds on it (once
    :meth:`take` ran)."""

    def __init__(self, directory: Path, session_id: str, *, fsync: bool) -> None:
        self.directory = directory
        self.path = directory / LEASE_FILE
        self.session_id = session_id
        self.fsync = fsync
        #: The lease :meth:`take` took; None before.
        self.lease: Lease | None = None
        self._fd: int | None = None

    def __repr__(self) -> str:
        return f"<LeaseFile {self.path} ({self.lease})>"

    def _read(self, fd: int) -> int | None:
        try:
            raw = os.pread(fd, _MAX_BYTES, 0)
        except OSError as exc:
            raise SessionReadError(f"cannot read the lease file {self.path}: {exc}") from exc
        text = raw.decode("ascii", "replace").strip()
        if not text:
            return None
        if not text.isdigit():
            raise SessionReadError(
                f"the lease file {self.path} holds {text!r}, not an epoch (a number)"
            )
        return int(text)

    def take(self) -> Lease:
        """Raise the stored epoch by one (durably) and hold the new one; blocks while a
        leased writer commits. Raises :class:`SessionWriteError` or
        :class:`SessionReadError`."""
        directory = self.directory
        try:
            made = not directory.exists()
            directory.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
            fd = os.open(self.path, _FLAGS, _FILE_MODE)
        except OSError as exc:
            raise SessionWriteError(f"cannot open the lease file {self.path}: {exc}") from exc
        self.close()
        self._fd = fd
        with self._locked(fd):
            epoch = (self._read(fd) or 0) + 1
            data = f"{epoch}\n".encode()
            try:
                # In place: an epoch's text is never shorter than the one before it.
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))
                if self.fsync:
                    os.fsync(fd)
                    for path in (directory, directory.parent) if made else (directory,):
                        fsync_dir(path)
            except OSError as exc:
                raise SessionWriteError(f"cannot write the lease file {self.path}: {exc}") from exc
            stored = (directory / FILE_NAME).exists()
        self.lease = Lease(self.session_id, epoch, stored)
        return self.lease

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Run the block (a commit) under the lease lock, once the stored epoch is
        checked to be the held lease's; else raise :class:`SessionFencedError` (see
        :meth:`Lease.check`) without running it."""
        lease, fd = self.lease, self._fd
        assert lease is not None, "guard() before take()"
        assert fd is not None, "guard() after close()"
        if lease.fenced is not None:  # fenced once, fenced for good: no I/O
            lease.check(None)
        with self._locked(fd):
            lease.check(self._read(fd))
            yield

    @contextlib.contextmanager
    def _locked(self, fd: int) -> Iterator[None]:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            raise SessionWriteError(f"cannot lock the lease file {self.path}: {exc}") from exc
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Let go of the file (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def fsync_dir(path: Path) -> None:
    """Sync the directory ``path`` (so the names made in it are on the disk)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
