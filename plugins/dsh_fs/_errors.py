"""Errors of the filesystem seam, shared by every implementation and by the tools.

Each carries the canonical absolute path it is about (``path``; ``None`` for setup
errors) and a stable ``code``. The model-facing messages of ``FS_NOT_OBSERVED`` and
``FS_STALE_VERSION`` are made by :func:`not_observed_message` and
:func:`stale_message`, so every layer words them the same way.
"""

from __future__ import annotations

from dsh import DshError

__all__ = [
    "FsError",
    "FsIOError",
    "FsNotDirectoryError",
    "FsNotFoundError",
    "FsNotObservedError",
    "FsNotRegularFileError",
    "FsNotTextError",
    "FsReadDeniedError",
    "FsSandboxDeniedError",
    "FsSetupError",
    "FsStaleVersionError",
    "not_observed_message",
    "stale_message",
]


class FsError(DshError):
    """Base class of the filesystem errors; ``path`` is the canonical target, if any."""

    code = "FS_ERROR"

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class FsSetupError(FsError, RuntimeError):
    """The seam is misused: no backend is set, or a second backend or policy is set."""

    code = "FS_SETUP"


class FsSandboxDeniedError(FsError, PermissionError):
    """A mutation was refused: the filesystem is read-only, or the target is outside the
    workspace (``..``, absolute paths and symlinks included)."""

    code = "FS_SANDBOX_DENIED"


class FsReadDeniedError(FsError, PermissionError):
    """A read was refused because its canonical target matches a ``deny_read`` glob."""

    code = "FS_READ_DENIED"


class FsNotFoundError(FsError, FileNotFoundError):
    """The target does not exist (or a read's offset is past its end)."""

    code = "FS_NOT_FOUND"


class FsNotRegularFileError(FsError, OSError):
    """The target exists but is not a regular file (a directory, a FIFO, a device)."""

    code = "FS_NOT_REGULAR_FILE"


class FsNotDirectoryError(FsError, NotADirectoryError):
    """A listing or search was asked for a path that is not a directory."""

    code = "FS_NOT_DIRECTORY"


class FsNotTextError(FsError, ValueError):
    """The file is not text: a NUL byte in its first 8 KiB, or invalid UTF-8."""

    code = "FS_NOT_TEXT"


class FsNotObservedError(FsError, RuntimeError):
    """The observation policy refused a write or edit of a file this session never read."""

    code = "FS_NOT_OBSERVED"


class FsStaleVersionError(FsError, RuntimeError):
    """The file changed on disk since this session read it (or while it was written)."""

    code = "FS_STALE_VERSION"


class FsIOError(FsError, OSError):
    """The operating system refused an operation (permissions, a full disk, a name that
    is not a directory on the way); the message names the path and the reason."""

    code = "FS_IO"


def not_observed_message(kind: str, path: str) -> str:
    """The ``FS_NOT_OBSERVED`` message for a ``write`` or an ``edit`` of ``path``."""
    if kind == "edit":
        return f'edit requires reading "{path}" first — read the file, then retry'
    return (
        f'cannot overwrite existing "{path}" without reading it first — read the file, then retry'
    )


def stale_message(path: str) -> str:
    """The ``FS_STALE_VERSION`` message for ``path``."""
    return f'"{path}" changed since it was read — re-read the file, then retry'
