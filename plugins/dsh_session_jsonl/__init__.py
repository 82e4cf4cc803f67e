"""Sessions persisted as JSONL files: one append-only log per session.

YAML name ``session-jsonl``; plugin ``JsonlSessions`` (needs the ``sessions`` service).
See this package's README for the file format and the durability guarantees.
"""

from __future__ import annotations

from ._errors import (
    SessionCorruptError,
    SessionDataError,
    SessionExistsError,
    SessionIdError,
    SessionInUseError,
    SessionReadError,
    SessionWriteError,
)
from ._format import (
    DURABLE_EVENTS,
    FILE_NAME,
    FORMAT_VERSION,
    SESSION_ID,
    check_session_id,
)
from ._listing import SessionSummary, list_sessions
from ._log import SessionLog
from ._plugin import JsonlSessions, JsonlSessionsConfig

plugin = JsonlSessions

__all__ = [
    "DURABLE_EVENTS",
    "FILE_NAME",
    "FORMAT_VERSION",
    "SESSION_ID",
    "JsonlSessions",
    "JsonlSessionsConfig",
    "SessionCorruptError",
    "SessionDataError",
    "SessionExistsError",
    "SessionIdError",
    "SessionInUseError",
    "SessionLog",
    "SessionReadError",
    "SessionSummary",
    "SessionWriteError",
    "check_session_id",
    "list_sessions",
    "plugin",
]
