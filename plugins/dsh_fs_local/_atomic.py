"""Atomic replacement of a file that cannot be redirected outside its checked path.

The parent directory is opened one component at a time from ``/`` without following
a symlink (the canonical path has none), so the temp file is created, and the rename
happens, inside that very directory even if a path component is swapped meanwhile.
Just before the rename the target is canonicalised again and the opened directory is
compared with the one at the path: any difference is :class:`PathChanged`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

from ._paths import canonical

__all__ = ["PathChanged", "open_directory", "replace", "write_temp"]

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class PathChanged(Exception):
    """A component of the canonical path became a symlink, or the directory moved."""


def _descend(fd: int, name: str) -> int:
    try:
        return os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):  # made by someone else meanwhile
            os.mkdir(name, dir_fd=fd)
        return os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    except OSError:
        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise PathChanged(name) from None
        raise


def open_directory(path: str) -> int:
    """A descriptor of the canonical directory ``path``, creating what is missing and
    following no symlink (:class:`PathChanged` when a component is one)."""
    fd = os.open("/", _DIRECTORY)
    try:
        for name in path.split("/"):
            if name:
                child = _descend(fd, name)
                os.close(fd)
                fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _mode_of(directory: int, name: str) -> int | None:
    """The permission bits of the regular file ``name`` (``None``: no such file)."""
    try:
        st = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None


def write_temp(directory: int, name: str, data: bytes) -> str:
    """Write ``data`` to a new temp file next to ``name`` in ``directory`` (synced,
    with the permissions of the file it replaces); returns the temp file's name."""
    mode = _mode_of(directory, name)
    temp = f".{name[:64]}.{secrets.token_hex(6)}.dsh-tmp"
    fd = os.open(temp, _NEW_FILE, 0o666 if mode is None else 0o600, dir_fd=directory)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temp, dir_fd=directory)
        raise
    os.close(fd)
    return temp


def replace(target: str, data: bytes) -> None:
    """Make ``data`` the content of the canonical path ``target``, atomically."""
    parent, name = os.path.split(target)
    directory = open_directory(parent)
    try:
        temp = write_temp(directory, name, data)
        try:
            if canonical(target) != target:
                raise PathChanged(target)
            opened, current = os.fstat(directory), os.stat(parent, follow_symlinks=False)
            if (opened.st_dev, opened.st_ino) != (current.st_dev, current.st_ino):
                raise PathChanged(parent)
            os.rename(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            os.unlink(temp, dir_fd=directory)
            raise
        os.fsync(directory)
    finally:
        os.close(directory)
