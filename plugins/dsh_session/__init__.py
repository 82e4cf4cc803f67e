"""Sessions: the append-only event log of an agent and the history derived from it.

YAML name ``sessions``; service ``Sessions`` at ctx key ``sessions``. See the README.
"""

from __future__ import annotations

from ._describe import TITLE_CHARS, describe_session, short_title
from ._session import (
    COMMIT_EVENTS,
    EVENT_TYPE,
    EVENT_TYPES,
    Session,
    SessionError,
    SessionEvent,
    SessionHeader,
)
from ._store import Sessions, SessionSpecs, StoredSession

plugin = Sessions

__all__ = [
    "COMMIT_EVENTS",
    "EVENT_TYPE",
    "EVENT_TYPES",
    "TITLE_CHARS",
    "Session",
    "SessionError",
    "SessionEvent",
    "SessionHeader",
    "SessionSpecs",
    "Sessions",
    "StoredSession",
    "describe_session",
    "plugin",
    "short_title",
]
