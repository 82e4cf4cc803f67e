"""Sessions persisted in one SQLite database (stdlib ``sqlite3``, WAL).

YAML name ``session-sqlite``; plugin ``SqliteSessions`` (needs the ``sessions``
service). The same store contract as ``session-jsonl``; see this package's README.
"""

from __future__ import annotations

from dsh_session import (
    SessionCorruptError,
    SessionDataError,
    SessionExistsError,
    SessionIdError,
    SessionInUseError,
    SessionReadError,
    SessionSummary,
    SessionWriteError,
)

from ._db import SCHEMA_VERSION
from ._errors import SessionDatabaseError
from ._listing import list_sessions, read_session
from ._locks import SessionLock, locks_of
from ._log import SqliteLog, load_session
from ._plugin import SqliteSessions, SqliteSessionsConfig

plugin = SqliteSessions

__all__ = [
    "SCHEMA_VERSION",
    "SessionCorruptError",
    "SessionDataError",
    "SessionDatabaseError",
    "SessionExistsError",
    "SessionIdError",
    "SessionInUseError",
    "SessionLock",
    "SessionReadError",
    "SessionSummary",
    "SessionWriteError",
    "SqliteLog",
    "SqliteSessions",
    "SqliteSessionsConfig",
    "list_sessions",
    "load_session",
    "locks_of",
    "plugin",
    "read_session",
]
