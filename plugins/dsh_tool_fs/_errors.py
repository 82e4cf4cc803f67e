"""Errors of the ``edit`` tool."""

from __future__ import annotations

from dsh_fs import FsError

__all__ = ["FsAmbiguousEditError", "FsEditNotFoundError"]


class FsEditNotFoundError(FsError, LookupError):
    """``edit``: ``old_string`` does not occur in the file."""

    code = "FS_EDIT_NOT_FOUND"


class FsAmbiguousEditError(FsError, ValueError):
    """``edit``: ``old_string`` occurs several times and ``replace_all`` is false."""

    code = "FS_AMBIGUOUS_EDIT"
