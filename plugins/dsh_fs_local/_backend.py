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

from . import _atomic, _walk
from ._fence import Fence

__all__ = ["LocalBackend"]

_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def _read(target: str) -> bytes | None:
    try:
        fd = os.open(target, _READ)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise FsIOError(f'cannot read "{target}": {exc.strerror}', target) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FsNotRegularFileError(
                f'"{target}" is not a regular file: it is {_walk.kind_of(mode)}', target
            )
        with io.FileIO(fd, closefd=False) as file:
            return file.readall()
    finally:
        os.close(fd)


class LocalBackend:
    """Paths, reads, atomic writes, listing and search on this machine's filesystem,
    fenced by a :class:`Fence`. Blocking work runs in worker threads."""

    def __init__(self, fence: Fence) -> None:
        self.fence = fence

    async def resolve(self, path: str, base: str) -> str:
        # A few lstat calls on a local disk: cheaper done here than in a thread.
        return os.path.realpath(os.path.join(base, path))  # noqa: ASYNC240 (see above)

    def check_read(self, target: str, call: Any) -> None:
        self.fence.check_read(target)

    def check_write(self, target: str, call: Any) -> None:
        self.fence.check_write(target, call)

    async def read_bytes(self, target: str) -> bytes | None:
        return await anyio.to_thread.run_sync(_read, target)

    async def replace(self, target: str, data: bytes, call: Any) -> None:
        await anyio.to_thread.run_sync(self._replace, target, data, call)

    def _replace(self, target: str, data: bytes, call: Any) -> None:
        try:
            _atomic.replace(target, data)
        except _atomic.PathChanged:
            self.fence.check_write(os.path.realpath(target), call)
            raise FsStaleVersionError(
                f'"{target}" changed while it was being written (a directory or symlink '
                "in its path was swapped) — re-read the file, then retry",
                target,
            ) from None
        except OSError as exc:
            raise FsIOError(f'cannot write "{target}": {exc.strerror}', target) from exc

    async def list_files(self, directory: str, match: Callable[[str], object]) -> list[FileEntry]:
        return await anyio.to_thread.run_sync(_walk.list_files, directory, match)

    async def search(self, target: str, query: SearchQuery, call: Any) -> SearchResult:
        self.fence.check_read(target)
        return await anyio.to_thread.run_sync(_walk.search, target, query, self.fence.denied)
