"""The database file: connecting, the schema, and encoding and decoding rows.

One table holds the sessions (their headers), one their events, keyed by the
session's row and the event's ``seq``. Event data is stored as JSON text, as a line
of a JSONL file stores it, so both stores check records with the same rules.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dsh_session import InvalidRecord, SessionCorruptError, SessionHeader

from ._errors import SessionDatabaseError
from ._locks import locks_of

__all__ = [
    "SCHEMA_VERSION",
    "connect",
    "decode_event",
    "encode_json",
    "header_of",
    "prepare",
    "reader",
    "transaction",
]

#: ``PRAGMA user_version`` of a session database this backend reads and writes.
SCHEMA_VERSION = 1

_SCHEMA = (
    """CREATE TABLE sessions (
        key INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        created_at REAL NOT NULL,
        cwd TEXT,
        meta TEXT NOT NULL
    )""",
    """CREATE TABLE events (
        session INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time REAL NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session, seq)
    )""",
)
_TABLES = {"sessions", "events"}
_DIR_MODE = 0o700
#: The lock file of setting a database up, in its lock folder (a session id never
#: starts with a dot, so no session's lock file has this name).
_SETUP_LOCK = ".setup"


def encode_json(value: Mapping[str, Any]) -> str:
    """Compact JSON text. Raises ``TypeError``/``ValueError`` for data that is not JSON;
    a lone surrogate is written as a ``\\u`` escape (SQLite text must be UTF-8)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"))
    return text


def connect(path: Path, *, create: bool, fsync: bool, busy_ms: int) -> sqlite3.Connection:
    """A connection to ``path`` in autocommit mode (transactions are explicit); the
    file is created only with ``create``. Raises ``sqlite3.Error``."""
    mode = "rwc" if create else "rw"
    uri = f"file:{urllib.parse.quote(str(path))}?mode={mode}"
    connection = sqlite3.connect(
        uri, uri=True, isolation_level=None, timeout=busy_ms / 1000, check_same_thread=True
    )
    # FULL syncs the WAL at every commit; NORMAL leaves that to the OS (a commit
    # survives the process, not a power cut).
    connection.execute(f"PRAGMA synchronous = {'FULL' if fsync else 'NORMAL'}")
    return connection


@contextlib.contextmanager
def transaction(connection: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE") -> Iterator[None]:
    """Run the block in one transaction: committed at its end, rolled back when the
    block or the commit fails (``BEGIN IMMEDIATE`` takes the write lock at once)."""
    connection.execute(begin)
    try:
        yield
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def reader(path: Path, *, fsync: bool = False, busy_ms: int) -> sqlite3.Connection:
    """A connection to the existing database ``path`` (nothing created); raises
    :class:`SessionDatabaseError`."""
    try:
        return connect(path, create=False, fsync=fsync, busy_ms=busy_ms)
    except sqlite3.Error as exc:
        problem = f"cannot open session database {path}: {exc}"
        raise SessionDatabaseError(problem, str(path)) from exc


def _problem(path: Path, exc: sqlite3.Error, busy_ms: int) -> SessionDatabaseError:
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY:
        return SessionDatabaseError(
            f"session database {path} is locked by another connection (still busy after "
            f"{busy_ms} ms): {exc}",
            str(path),
        )
    return SessionDatabaseError(f"cannot use session database {path}: {exc}", str(path))


def prepare(path: Path, *, fsync: bool, busy_ms: int, create: bool) -> sqlite3.Connection | None:
    """Open the session database at ``path``: check it is one of ours (or empty, then
    give it the schema), switch it to WAL and take the write lock once, so a damaged,
    foreign or locked file fails here. None when the file does not exist and
    ``create`` is false. Raises :class:`SessionDatabaseError` naming the file."""
    if create:
        try:
            path.parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
            # Made here, so that it is private from the start (SQLite gives its -wal and
            # -shm files the same mode).
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except OSError as exc:
            raise SessionDatabaseError(
                f"cannot create session database {path}: {exc}", str(path)
            ) from exc
    elif not path.exists():
        return None
    with _setting_up(path):
        try:
            connection = connect(path, create=create, fsync=fsync, busy_ms=busy_ms)
        except sqlite3.Error as exc:
            raise _problem(path, exc, busy_ms) from exc
        try:
            _check_schema(connection, path, busy_ms)
        except BaseException:
            connection.close()
            raise
    return connection


@contextlib.contextmanager
def _setting_up(path: Path) -> Iterator[None]:
    """Run the block holding the set-up lock of the database ``path`` (an exclusive
    ``flock`` on ``<path>-locks/.setup``), so that one connection at a time switches a
    new file to WAL and gives it the schema.

    Two connections converting a file still in rollback-journal mode at once each hold
    a shared lock and want an exclusive one: SQLite answers one of them busy at once,
    without waiting (the wait could never end), so that race would fail a connection
    however long ``busy_ms`` is. Raises :class:`SessionDatabaseError`.
    """
    directory = locks_of(path)
    try:
        directory.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        fd = os.open(
            directory / _SETUP_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except OSError as exc:
        raise SessionDatabaseError(
            f"cannot lock session database {path} to set it up: {exc}", str(path)
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held for one set-up: a few ms, or a busy wait
        yield
    finally:
        os.close(fd)


def _check_schema(connection: sqlite3.Connection, path: Path, busy_ms: int) -> None:
    try:
        # Persistent in the file. It fails (busy) only while another application's
        # connection holds the file in rollback-journal mode (dsh's connections set a
        # file up one at a time); a local file always takes WAL.
        connection.execute("PRAGMA journal_mode = WAL")
        with transaction(connection):
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            tables = {
                row[0]
                for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if version == 0 and not tables:
                for statement in _SCHEMA:
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION or not tables >= _TABLES:
                found = ", ".join(sorted(tables)) or "none"
                raise SessionDatabaseError(
                    f"{path} is not a dsh session database of schema version "
                    f"{SCHEMA_VERSION} (user_version {version}; tables: {found})",
                    str(path),
                )
    except sqlite3.Error as exc:
        raise _problem(path, exc, busy_ms) from exc


def decode_event(row: tuple[Any, ...]) -> object:
    """A row of ``events`` (seq, type, time, data) as the record a JSONL line holds,
    or the :class:`InvalidRecord` saying why its data is not JSON."""
    seq, kind, when, data = row
    try:
        value = json.loads(data)
    except (TypeError, ValueError) as exc:
        return InvalidRecord(f"data is not JSON ({exc})")
    return {"seq": seq, "type": kind, "time": when, "data": value}


def header_of(row: tuple[Any, ...], path: Path) -> SessionHeader:
    """A row of ``sessions`` (id, created_at, cwd, meta) as a header; raises
    :class:`SessionCorruptError` naming the session."""
    session_id, created_at, cwd, meta = row
    where = f"{path}: session {session_id!r}"
    if type(created_at) not in (int, float) or not (cwd is None or isinstance(cwd, str)):
        raise SessionCorruptError(
            "the session's created_at or cwd is malformed", str(path), -1, where=where
        )
    try:
        value = json.loads(meta)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise SessionCorruptError(
            "the session's meta is not a JSON object", str(path), -1, where=where
        )
    return SessionHeader(session_id, created_at, cwd, value)
