"""Sessions: the append-only event log of an agent and the history derived from it.

YAML name ``sessions``; service ``Sessions`` at ctx key ``sessions``. See the README.
A store plugin's base (``StorePlugin``), the store directory helpers and the session
descriptions of a listing are imported on first use (docs/rfc/0055).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._event import OpaqueEvent, SessionError, SessionEvent
from ._meta import META_EVENT, fold_meta
from ._packed import CHUNKS_ROW, ChunkRun, EventLog
from ._persistence import (
    DURABLE_EVENTS,
    SESSION_ID,
    Checked,
    InvalidRecord,
    Lease,
    LogDamage,
    SessionCorruptError,
    SessionDataError,
    SessionExistsError,
    SessionFencedError,
    SessionIdError,
    SessionInUseError,
    SessionReadError,
    SessionSummary,
    SessionWriteError,
    check_event,
    check_log,
    check_session_id,
    recent_first,
)
from ._session import (
    COMMIT_EVENTS,
    EVENT_TYPE,
    EVENT_TYPES,
    Session,
    SessionHeader,
    message_of,
)
from ._store import (
    Sessions,
    SessionSpecs,
    SessionStoreConflictError,
    StoredSession,
    UnsavedRecords,
)

if TYPE_CHECKING:
    from ._describe import TITLE_CHARS, describe_session, short_title
    from ._paths import directory_problem, lock_or_in_use, path_error, store_path
    from ._store_plugin import LoadedSession, StoreConfig, StoreLog, StorePlugin

plugin = Sessions

#: The names a deployment without a session store does not need, by module.
_LAZY = {
    **dict.fromkeys(("TITLE_CHARS", "describe_session", "short_title"), "._describe"),
    **dict.fromkeys(("directory_problem", "lock_or_in_use", "path_error", "store_path"), "._paths"),
    **dict.fromkeys(("LoadedSession", "StoreConfig", "StoreLog", "StorePlugin"), "._store_plugin"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    return value


__all__ = [
    "CHUNKS_ROW",
    "COMMIT_EVENTS",
    "DURABLE_EVENTS",
    "EVENT_TYPE",
    "EVENT_TYPES",
    "META_EVENT",
    "SESSION_ID",
    "TITLE_CHARS",
    "Checked",
    "ChunkRun",
    "EventLog",
    "InvalidRecord",
    "Lease",
    "LoadedSession",
    "LogDamage",
    "OpaqueEvent",
    "Session",
    "SessionCorruptError",
    "SessionDataError",
    "SessionError",
    "SessionEvent",
    "SessionExistsError",
    "SessionFencedError",
    "SessionHeader",
    "SessionIdError",
    "SessionInUseError",
    "SessionReadError",
    "SessionSpecs",
    "SessionStoreConflictError",
    "SessionSummary",
    "SessionWriteError",
    "Sessions",
    "StoreConfig",
    "StoreLog",
    "StorePlugin",
    "StoredSession",
    "UnsavedRecords",
    "check_event",
    "check_log",
    "check_session_id",
    "describe_session",
    "directory_problem",
    "fold_meta",
    "lock_or_in_use",
    "message_of",
    "path_error",
    "plugin",
    "recent_first",
    "short_title",
    "store_path",
]
