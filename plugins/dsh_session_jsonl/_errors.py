"""The errors of the JSONL session backend: those every store shares, declared in
``dsh_session`` and re-exported here (the names this package always had)."""

from __future__ import annotations

from dsh_session import (
    SessionCorruptError,
    SessionDataError,
    SessionExistsError,
    SessionIdError,
    SessionInUseError,
    SessionReadError,
    SessionWriteError,
)

__all__ = [
    "SessionCorruptError",
    "SessionDataError",
    "SessionExistsError",
    "SessionIdError",
    "SessionInUseError",
    "SessionReadError",
    "SessionWriteError",
]
