"""``LocalBackend``: the ``dsh_fs`` backend over the local filesystem."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from typing import Any

import anyio

from dsh_fs import (
    FileEntry,
    FsIOError,
    FsNotRegularFileError,
    FsStaleVersionError,
    SearchQuery,
    SearchResult,
)

from . import _atomic, _paths, _walk
from ._fence import Fence

__all__ = ["INLINE_READ", "LocalBackend"]

_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC

#: Files up to this size are read on the event loop: a page-cache read of this much
#: costs less than the hand-off to a worker thread. Larger ones are read in a thread.
INLINE_READ = 64 * 1024


def _open(target: str, fence: Fence) -> tuple[int, int] | None:
    """A descriptor of the regular file ``target`` and its size (``None``: missing),
    opened without following a symlink swapped in since ``target`` was canonicalised
    and refused by ``fence`` for what was opened."""
    try:
        fd, path = _paths.open_canonical(target, _READ)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise FsIOError(f'cannot read "{target}": {exc.strerror}', target) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FsNotRegularFileError(
                f'"{path}" is not a regular file: it is {_walk.kind_of(st.st_mode)}', path
            )
        fence.check_opened(path, st)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _read_all(fd: int) -> bytes:
    with io.FileIO(fd, closefd=False) as file:
        return file.readall()


class LocalBackend:
    """Paths, reads, atomic writes, listing and search on this machine's filesystem,
    fenced by a :class:`Fence`. Blocking work runs in worker threads."""

    def __init__(self, fence: Fence) -> None:
        self.fence = fence

    async def resolve(self, path: str, base: str) -> str:
        # A few readlink calls on a local disk: cheaper done here than in a thread.
        return _paths.canonical(os.path.join(base, path))

    def check_read(self, target: str, call: Any) -> None:
        self.fence.check_read(target)

    def check_write(self, target: str, call: Any) -> None:
        self.fence.check_write(target, call)

    async def read_bytes(self, target: str) -> bytes | None:
        # Opening is one syscall (openat2), done here like the readlink calls of resolve.
        opened = _open(target, self.fence)
        if opened is None:
            return None
        fd, size = opened
        try:
            if size <= INLINE_READ:
                return _read_all(fd)
            return await anyio.to_thread.run_sync(_read_all, fd)
        finally:
            os.close(fd)

    async def replace(self, target: str, data: bytes, call: Any) -> None:
        await anyio.to_thread.run_sync(self._replace, target, data, call)

    def _replace(self, target: str, data: bytes, call: Any) -> None:
        try:
            _atomic.replace(target, data)
        except _atomic.PathChanged:
            self.fence.check_write(_paths.canonical(target), call)
            raise FsStaleVersionError(
                f'"{target}" changed while it was being written (a directory or symlink '
                "in its path was swapped) — re-read the file, then retry",
                target,
            ) from None
        except OSError as exc:
            raise FsIOError(f'cannot write "{target}": {exc.strerror}', target) from exc

    async def list_files(self, directory: str, match: Callable[[str], object]) -> list[FileEntry]:
        return await anyio.to_thread.run_sync(_walk.list_files, directory, match, self.fence)

    async def search(self, target: str, query: SearchQuery, call: Any) -> SearchResult:
        self.fence.check_read(target)
        return await anyio.to_thread.run_sync(_walk.search, target, query, self.fence)
