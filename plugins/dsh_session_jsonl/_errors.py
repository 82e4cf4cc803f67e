"""The errors of the JSONL session backend; each names the session, file or line at fault."""

from __future__ import annotations

from dsh import DshError
from dsh_session import SessionError

__all__ = [
    "SessionCorruptError",
    "SessionDataError",
    "SessionExistsError",
    "SessionIdError",
    "SessionInUseError",
    "SessionReadError",
    "SessionWriteError",
]


class SessionIdError(SessionError):
    """A session id that could escape the root or is not a plain file name."""

    code = "SESSION_ID"


class SessionExistsError(SessionError):
    """A new session was given the id of a session already stored under the root."""

    code = "SESSION_EXISTS"


class SessionInUseError(SessionError):
    """The session's file is held by a live session (this process or another one)."""

    code = "SESSION_IN_USE"


class SessionCorruptError(SessionError):
    """A stored session cannot be loaded safely; ``path`` and ``line`` locate the record."""

    code = "SESSION_CORRUPT"

    def __init__(self, message: str, path: str, line: int) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line


class SessionDataError(SessionError, TypeError):
    """An event carried data that cannot be written as JSON (NaN, an object, a cycle)."""

    code = "SESSION_DATA"


class SessionWriteError(DshError, OSError):
    """Writing (or syncing) a session file failed; the file was cut back to its last
    good length, so the records are written again by the next commit."""

    code = "SESSION_WRITE"


class SessionReadError(DshError, OSError):
    """A stored session file could not be read."""

    code = "SESSION_READ"
