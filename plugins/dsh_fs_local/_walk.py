"""Listing and searching directory trees (run in a worker thread)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable

import anyio.from_thread

from dsh_fs import (
    TEXT_PROBE,
    FileEntry,
    FsNotDirectoryError,
    FsNotFoundError,
    FsNotRegularFileError,
    Match,
    SearchQuery,
    SearchResult,
)

from ._ignore import Ignores, ignored, load_ignores, with_directory

__all__ = ["kind_of", "list_files", "search"]

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}

#: Pattern features whose meaning differs between a whole text and one line: with
#: them, every line is tried; without them, a file the whole-text search misses is
#: skipped at once.
_LINE_ONLY = re.compile(r"\\[AZ]|\(\?<[=!]|\(\?[a-zA-Z]*-")


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, for messages (``"a directory"``)."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _stat(path: str, verb: str) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise FsNotFoundError(f'cannot {verb} "{path}": not found', path) from None


def list_files(directory: str, match: Callable[[str], object]) -> list[FileEntry]:
    """The regular files under ``directory`` whose relative path ``match`` accepts."""
    if not stat.S_ISDIR(_stat(directory, "list").st_mode):
        raise FsNotDirectoryError(f'cannot list "{directory}": not a directory', directory)
    found: list[FileEntry] = []
    pending = [(directory, "")]
    while pending:
        anyio.from_thread.check_cancelled()
        path, relative = pending.pop()
        try:
            entries = os.scandir(path)
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != ".git":
                        pending.append((entry.path, f"{relative}{entry.name}/"))
                elif entry.is_file(follow_symlinks=False) and match(relative + entry.name):
                    found.append(FileEntry(entry.path, entry.stat(follow_symlinks=False).st_mtime))
    return found


class _Search:
    """One search: the query, what to skip, and what was found so far."""

    def __init__(self, query: SearchQuery, denied: Callable[[str], object]) -> None:
        self.query = query
        self.regex = query.regex
        self.filter = not _LINE_ONLY.search(query.regex.pattern)
        self.denied = denied
        self.matches: list[Match] = []
        self.total = 0

    def file(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return
        if not data or b"\0" in data[:TEXT_PROBE]:
            return
        text = data.decode("utf-8", "replace")
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        search = self.regex.search
        if self.filter and not search(text):
            return
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        limit, matches = self.query.limit, self.matches
        for number, line in enumerate(lines, 1):
            if search(line):
                self.total += 1
                if len(matches) < limit:
                    matches.append(Match(path, number, line))

    def tree(self, root: str) -> None:
        """Search the files under ``root``, depth first, each directory's entries by
        name; ``.git``, ignored and denied files are skipped."""
        include = self.query.include
        pending: list[tuple[str, str, Ignores, bool]] = [(root, "", load_ignores(root), True)]
        while pending:
            path, relative, ignores, is_dir = pending.pop()
            if not is_dir:
                self.file(path)
                continue
            anyio.from_thread.check_cancelled()
            ignores = with_directory(ignores, path)
            try:
                with os.scandir(path) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            items = []
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != ".git" and not ignored(ignores, entry.path, True):
                        items.append((entry.path, f"{relative}{entry.name}/", ignores, True))
                elif (
                    entry.is_file(follow_symlinks=False)
                    and (include is None or include(relative + entry.name))
                    and not ignored(ignores, entry.path, False)
                    and not self.denied(entry.path)
                ):
                    items.append((entry.path, "", ignores, False))
            pending.extend(reversed(items))


def search(target: str, query: SearchQuery, denied: Callable[[str], object]) -> SearchResult:
    """The matches of ``query`` in the file or directory ``target``; files whose
    canonical path ``denied`` accepts are skipped (a denied file searched by name is
    the caller's to refuse)."""
    mode = _stat(target, "search").st_mode
    run = _Search(query, denied)
    if stat.S_ISDIR(mode):
        run.tree(target)
    elif stat.S_ISREG(mode):
        run.file(target)
    else:
        raise FsNotRegularFileError(f'cannot search "{target}": it is {kind_of(mode)}', target)
    return SearchResult(run.matches, run.total)
