"""Reading stored session files: locking them, loading (cutting a damaged tail) and
reading a snapshot without a lock.

Like the writes (``_log.py``), every file operation goes through ``os`` on raw
descriptors, so a failed read or truncation is seen where it happens.
"""

from __future__ import annotations

import os
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from dsh_session import EVENT_TYPES, EventLog, SessionHeader, lock_or_in_use

from ._errors import SessionReadError, SessionWriteError
from ._format import FILE_NAME, FORMAT_VERSION, parse_log

__all__ = ["Loaded", "cut", "load_session", "open_locked", "read_locked", "read_snapshot"]

_READ_SIZE = 1 << 20


def open_locked(path: Path, shared: bool = False) -> int | None:
    """Open ``path`` for appending and lock it; None when it does not exist."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SessionReadError(f"cannot open session file {path}: {exc}") from exc
    in_use = f"session file {path} is in use by a live session (in this process or another)"
    lock_or_in_use(fd, shared, in_use)
    return fd


def read_locked(path: Path, shared: bool = False) -> tuple[int, bytes] | None:
    """Open and lock ``path`` and read it all; None when it does not exist.

    The caller owns the returned descriptor (and so the lock).
    """
    fd = open_locked(path, shared)
    if fd is None:
        return None
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, _READ_SIZE):
            chunks.append(chunk)
    except OSError as exc:
        os.close(fd)
        raise SessionReadError(f"cannot read session file {path}: {exc}") from exc
    return fd, b"".join(chunks)


def cut(fd: int, length: int, path: Path, what: str, *, fsync: bool) -> None:
    """Truncate ``path`` to ``length`` bytes, and sync that (with ``fsync``)."""
    try:
        os.ftruncate(fd, length)
        if fsync:
            os.fsync(fd)
    except OSError as exc:
        raise SessionWriteError(f"cannot cut session file {path} back ({what}): {exc}") from exc


@dataclass
class Loaded:
    """A stored session, its damaged tail cut (``length`` = its file's size now)."""

    header: SessionHeader
    events: EventLog
    length: int
    notes: list[str]
    #: The file's format version (a version-1 file is appended to in version 1).
    version: int = FORMAT_VERSION


def load_session(
    directory: Path,
    session_id: str,
    *,
    fsync: bool,
    known: AbstractSet[str] = EVENT_TYPES,
    shared: bool = False,
) -> Loaded | None:
    """Load ``<directory>/session.jsonl``: parse it and cut a damaged tail (durably,
    with ``fsync``). None when absent. ``shared``: for a leased writer (which took its
    lease first, so an older attempt writes nothing more).

    Nothing else is written: a turn a crash left open is closed by the store when it
    enters the session, and its closing records reach the file as ``session/event``s.
    """
    path = directory / FILE_NAME
    opened = read_locked(path, shared)
    if opened is None:
        return None
    fd, raw = opened
    try:
        parsed = parse_log(raw, str(path), session_id, known)
        if parsed.length < len(raw):
            cut(fd, parsed.length, path, "dropping a damaged tail", fsync=fsync)
    finally:
        os.close(fd)
    return Loaded(parsed.header, parsed.events, parsed.length, parsed.notes, parsed.version)


def read_snapshot(
    directory: Path, session_id: str, known: AbstractSet[str] = EVENT_TYPES
) -> tuple[SessionHeader, EventLog] | None:
    """``<directory>/session.jsonl`` as written now, read without a lock and changing
    nothing (a damaged or half-written tail left out); None when absent."""
    path = directory / FILE_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SessionReadError(f"cannot read session file {path}: {exc}") from exc
    parsed = parse_log(raw, str(path), session_id, known)
    return parsed.header, parsed.events
