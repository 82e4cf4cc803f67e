"""Where a persistence backend stores sessions: checked when it starts, so a path that
cannot work fails the deployment (``dsh check`` included) instead of every commit."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from dsh import ConfigError, Context

from ._persistence import SessionInUseError

__all__ = ["directory_problem", "lock_or_in_use", "path_error", "store_path"]


def store_path(ctx: Context, key: str, value: str) -> Path:
    """Config ``key``'s path ``value``, ``~`` expanded and made absolute (from the
    process's current directory); a ``~user`` that names nobody raises the located
    :func:`path_error`."""
    try:
        return Path(value).expanduser().absolute()
    except RuntimeError as exc:  # "Could not determine home directory."
        raise path_error(ctx, key, Path(value), f"its ~ cannot be expanded ({exc})") from None


def directory_problem(path: Path) -> str | None:
    """Why ``path`` cannot be (or become) a directory this process writes in, or None.

    A missing directory is fine when its nearest existing ancestor is a directory this
    process may write in: the backend makes it with its first write (so loading a
    deployment still writes nothing).
    """
    probe = path
    while True:
        try:
            mode = probe.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            if probe.is_symlink():
                return f"{probe} is a symbolic link to nothing"
            probe = probe.parent
            continue
        except OSError as exc:
            return f"{probe} cannot be examined ({exc.strerror})"
        break
    if not stat.S_ISDIR(mode):
        kind = "a regular file" if stat.S_ISREG(mode) else "not a directory"
        if probe == path:
            return f"{probe} is {kind}, not a directory"
        return f"{probe} is {kind}, so no directory can be made under it"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable by this process"
    return None


def path_error(ctx: Context, key: str, value: Path, problem: str) -> ConfigError:
    """The located error of config ``key`` (a path, ``value`` as resolved) that cannot
    work: ``<file>:<line>: <plugin> <key> "<value>" cannot be used: <problem>``."""
    entry = ctx.fiber.entry
    where = "" if entry is None else f"{entry.locate((key,))}: "
    plugin = ctx.fiber.name
    return ConfigError(f'{where}{plugin} {key} "{value}" cannot be used: {problem}')


def lock_or_in_use(fd: int, shared: bool, in_use: str) -> None:
    """Lock the file of descriptor ``fd`` without waiting (advisory, released when it
    is closed): exclusively, or ``shared`` with the other leased writers. When another
    holds it, close ``fd`` and raise :class:`SessionInUseError` saying ``in_use``."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SessionInUseError(in_use) from None
