"""The file of a live session: durable appends (``SessionLog``), made for a new
session, reopened after a load (``reopen``) or attached to one already live (``attach``).

Every file operation goes through ``os`` on raw descriptors, so a short write, a
failed ``fsync`` or a failed truncation is seen and handled where it happens. Reading
stored files is ``_load.py``'s; sweeping what a crash left, ``_sweep.py``'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from dsh_session import (
    EVENT_TYPES,
    ChunkRun,
    EventLog,
    SessionEvent,
    SessionFencedError,
    SessionHeader,
)

from ._errors import (
    SessionDataError,
    SessionExistsError,
    SessionInUseError,
    SessionWriteError,
)
from ._format import DURABLE_EVENTS, FILE_NAME, encode, encode_header, parse_log
from ._lease import LeaseFile, fsync_dir
from ._load import cut, open_locked, read_locked

__all__ = ["SessionLog", "attach", "reopen"]

_log = logging.getLogger("dsh.session-jsonl")

_DIR_MODE = 0o700
_FILE_MODE = 0o600


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class SessionLog:
    """The file of one live session.

    Records are encoded as they are appended and kept in a buffer; a durable record
    (one of ``durable``: ``DURABLE_EVENTS`` and the types plugins declared durable)
    writes the buffer and itself, then fsyncs. The chunks of a
    step wait in the buffer as their session's :class:`~dsh_session.ChunkRun` and are
    written as one packed row (``packs``; a version-1 file gets a row per chunk). The
    file is created by the first write (header first, published by a hard link so it
    never exists without its header). A failed write cuts the file back to its last
    good length and keeps the records buffered, so the next commit writes them again
    without a gap.

    With ``lease`` (the lease file of a lease this process took) every write happens
    under the lease's lock once its epoch is checked (``LeaseFile.guard``), and the
    file is held shared with the other leased writers.
    """

    def __init__(
        self,
        directory: Path,
        header: SessionHeader,
        *,
        fsync: bool,
        fd: int | None = None,
        length: int = 0,
        packs: bool = True,
        lease: LeaseFile | None = None,
        durable: AbstractSet[str] = DURABLE_EVENTS,
    ) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME
        self.header = header
        try:
            self._header_line = encode_header(header)
        except (TypeError, ValueError) as exc:
            raise SessionDataError(
                f'session "{header.id}" cannot be persisted: its header carries data that '
                f"is not JSON ({exc})"
            ) from exc
        self.fsync = fsync
        #: Whether runs of chunks are written as packed rows (format version 2).
        self.packs = packs
        self._fd = fd
        self._length = length
        self._pending: list[bytes | ChunkRun] = []
        self._dirty = False  # a rollback failed: the file may be longer than _length
        self._unsynced_dirs: list[Path] = []
        self._broken: str | None = None
        self.lease = lease
        #: The types written and synced at once (``sessions.durable_types()``).
        self.durable = durable

    def __repr__(self) -> str:
        return f"<SessionLog {self.path} ({self._length} bytes, {len(self._pending)} pending)>"

    @property
    def length(self) -> int:
        """Bytes of the file known to be written (and synced, with ``fsync``)."""
        return self._length

    @property
    def pending(self) -> int:
        """Records appended but not yet written."""
        return len(self._pending)

    def add(self, events: Sequence[SessionEvent]) -> None:
        """Buffer ``events``; write and sync at once when one of them is durable.

        An :class:`~dsh_session.EventLog` is taken row by row: its runs of chunks stay
        packed (with :attr:`packs`)."""
        rows: Sequence[SessionEvent | ChunkRun] = (
            events.rows() if isinstance(events, EventLog) and self.packs else events
        )
        durable = False
        for row in rows:
            if isinstance(row, ChunkRun):
                self._pending.append(row)
                continue
            self._encode(row)
            durable = durable or row.type in self.durable
        if durable:
            self.flush()

    def add_chunk(self, run: ChunkRun, event: SessionEvent) -> None:
        """Buffer ``event``, a chunk of ``run``: the run is written packed when this
        log saw its first chunk (with :attr:`packs`), else the chunk gets its own row."""
        if self._pending and self._pending[-1] is run:
            return  # the whole run is buffered already
        if self.packs and event.seq == run.seq0:
            self._pending.append(run)
        else:
            self._encode(event)

    def _encode(self, event: SessionEvent) -> None:
        if self._broken is not None:
            raise SessionDataError(self._broken)
        try:
            line = encode(event.to_json())
        except (TypeError, ValueError) as exc:
            self._broken = (
                f'session "{self.header.id}" cannot be persisted past seq {event.seq}: '
                f'its "{event.type}" event carries data that is not JSON ({exc})'
            )
            raise SessionDataError(self._broken) from exc
        self._pending.append(line)

    def _lines(self) -> bytes:
        """The buffer as bytes: each buffered run is closed (the session's next chunk
        starts a new one) and becomes its packed row."""
        pending = self._pending
        for i, item in enumerate(pending):
            if isinstance(item, ChunkRun):
                if self._broken is not None:
                    raise SessionDataError(self._broken)
                item.close()
                try:
                    pending[i] = encode(item.to_json())
                except (TypeError, ValueError) as exc:
                    self._broken = (
                        f'session "{self.header.id}" cannot be persisted past seq '
                        f"{item.seq0}: a chunk of turn {item.turn}, step {item.step} "
                        f"carries data that is not JSON ({exc})"
                    )
                    raise SessionDataError(self._broken) from exc
        return b"".join(pending)  # type: ignore[arg-type]  # every run was encoded

    def flush(self) -> None:
        """Write the buffered records and sync them (with ``fsync``)."""
        if self._unsynced_dirs:
            self._sync_dirs()
        if not self._pending:
            return
        data = self._lines()
        if self.lease is None:
            self._write(data)
            return
        with self.lease.guard():
            self._write(data)

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            self._create(data)
            return
        fd = self._fd
        try:
            if self._dirty:
                os.ftruncate(fd, self._length)
                self._dirty = False
            _write_all(fd, data)
            if self.fsync:
                os.fsync(fd)
        except OSError as exc:
            self._rollback(fd, exc)
        self._length += len(data)
        self._pending.clear()

    def _rollback(self, fd: int, error: OSError) -> None:
        try:
            os.ftruncate(fd, self._length)
        except OSError as second:
            self._dirty = True
            raise SessionWriteError(
                f"cannot write session file {self.path}: {error}; cutting it back to "
                f"its last good length ({self._length} bytes) failed too ({second}); "
                "the next commit tries again"
            ) from ExceptionGroup("write and rollback failed", [error, second])
        raise SessionWriteError(
            f"cannot write session file {self.path}: {error}; it was cut back to its "
            f"last good length ({self._length} bytes) and the next commit writes the "
            f"{len(self._pending)} buffered record(s) again"
        ) from error

    def _create(self, data: bytes) -> None:
        blob = self._header_line + data
        directory = self.directory
        tmp = directory / f".{FILE_NAME}.{secrets.token_hex(8)}.tmp"
        try:
            directory.parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
            try:
                directory.mkdir(mode=_DIR_MODE)
                made = True
            except FileExistsError:  # left by a crash before the file was published
                made = False
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, _FILE_MODE
            )
        except OSError as exc:
            raise SessionWriteError(f"cannot create session file {self.path}: {exc}") from exc
        try:
            # A new file: never contended (shared: it is a leased writer's).
            shared = self.lease is not None
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            _write_all(fd, blob)
            if self.fsync:
                os.fsync(fd)
            os.link(tmp, self.path)
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, FileExistsError):
                raise SessionExistsError(
                    f'session "{self.header.id}" already exists: {self.path}'
                ) from None
            raise SessionWriteError(f"cannot create session file {self.path}: {exc}") from exc
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        self._fd = fd
        self._length = len(blob)
        self._pending.clear()
        self._unsynced_dirs = [directory, directory.parent] if made else [directory]
        self._sync_dirs()

    def _sync_dirs(self) -> None:
        """Make the new file's directory entries durable (with ``fsync``)."""
        while self._unsynced_dirs:
            path = self._unsynced_dirs[0]
            if self.fsync:
                try:
                    fsync_dir(path)
                except OSError as exc:
                    raise SessionWriteError(
                        f"cannot sync directory {path} after creating {self.path}: {exc}; "
                        "the records are written, the next commit syncs it again"
                    ) from exc
            del self._unsynced_dirs[0]

    def close(self) -> None:
        """Write what is buffered (errors are logged) and close the file."""
        try:
            self.flush()
        except (SessionWriteError, SessionExistsError, SessionDataError) as exc:
            _log.error("session %r: records lost when closing: %s", self.header.id, exc)
        except SessionFencedError as exc:
            _log.warning("%s (%d buffered record(s) dropped)", exc, len(self._pending))
        finally:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None
            if self.lease is not None:
                self.lease.close()


def reopen(
    directory: Path,
    header: SessionHeader,
    length: int,
    *,
    fsync: bool,
    version: int,
    lease: LeaseFile | None = None,
    durable: AbstractSet[str] = DURABLE_EVENTS,
) -> SessionLog:
    """The log of a session :func:`load_session` just loaded (``length`` bytes long,
    format ``version``), held by the writer of ``lease`` when given."""
    path = directory / FILE_NAME
    fd = open_locked(path, shared=lease is not None)
    if fd is None or os.fstat(fd).st_size != length:
        if fd is not None:
            os.close(fd)
        raise SessionInUseError(
            f"session file {path} changed after it was loaded (another process wrote it?)"
        )
    return SessionLog(
        directory,
        header,
        fsync=fsync,
        fd=fd,
        length=length,
        packs=version >= 2,
        lease=lease,
        durable=durable,
    )


def attach(
    directory: Path,
    header: SessionHeader,
    events: Sequence[SessionEvent],
    *,
    fsync: bool,
    known: AbstractSet[str] = EVENT_TYPES,
    durable: AbstractSet[str] = DURABLE_EVENTS,
) -> tuple[SessionLog, Sequence[SessionEvent]]:
    """The log of a live session the backend has not seen from its start, and the
    records of ``events`` its file still lacks (all of them when there is no file).

    A file written for this session earlier (by a previous instance of the backend)
    must hold a prefix of ``events``; a damaged tail is cut first.
    """
    path = directory / FILE_NAME
    opened = read_locked(path)
    if opened is None:
        return SessionLog(directory, header, fsync=fsync, durable=durable), events
    fd, raw = opened
    try:
        parsed = parse_log(raw, str(path), header.id, known)
        count = len(parsed.events)
        if parsed.header.created_at != header.created_at or count > len(events):
            raise SessionExistsError(
                f'{path} holds another session "{header.id}" than the live one of that id'
            )
        if parsed.length < len(raw):
            cut(fd, parsed.length, path, "dropping a damaged tail", fsync=fsync)
        log = SessionLog(
            directory,
            header,
            fsync=fsync,
            fd=fd,
            length=parsed.length,
            packs=parsed.version >= 2,
            durable=durable,
        )
    except BaseException:
        os.close(fd)
        raise
    return log, events[count:]
