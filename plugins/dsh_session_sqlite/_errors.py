"""The one error of its own the SQLite backend adds to those every store shares."""

from __future__ import annotations

from dsh_session import SessionReadError

__all__ = ["SessionDatabaseError"]


class SessionDatabaseError(SessionReadError):
    """The SQLite database cannot be used at all: it is not a database, is damaged, has
    another schema, or stays locked by another connection; ``path`` names the file."""

    code = "SESSION_DATABASE"

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path
