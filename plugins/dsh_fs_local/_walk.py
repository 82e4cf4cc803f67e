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

__all__ = ["kind_of", "list_files", "required_literal", "search"]

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}

_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 16
#: The leading characters of a pattern that match only themselves.
_LITERAL = re.compile(r"[^.^$*+?{}\[\]\\|()\r\n\ufffd]*")

#: Pattern features whose meaning differs between a whole text and one line: with
#: them, every line is tried; without them, a file the whole-text search misses is
#: skipped at once.
_LINE_ONLY = re.compile(r"\\[AZ]|\(\?<[=!]|\(\?!|\(\?[a-zA-Z]*-")


def _read(path: str) -> bytes:
    """The content of ``path`` (empty when it cannot be read): plain system calls, as a
    search opens thousands of files; reads of a chunk until a short one (a regular
    file's end)."""
    try:
        fd = os.open(path, _READ)
    except OSError:
        return b""
    try:
        data = os.read(fd, _CHUNK)
        if len(data) < _CHUNK:
            return data
        chunks = [data]
        while len(chunks[-1]) == _CHUNK:
            chunks.append(os.read(fd, _CHUNK))
        return b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(fd)


def required_literal(regex: re.Pattern[str]) -> bytes:
    """UTF-8 bytes every match of ``regex`` contains (empty when none is known): its
    leading literal characters, for a pattern without alternatives or case folding."""
    pattern = regex.pattern
    if regex.flags & re.IGNORECASE or "|" in pattern:
        return b""
    literal = _LITERAL.match(pattern).group()  # type: ignore[union-attr]  # always matches
    if pattern[len(literal) : len(literal) + 1] in ("*", "?", "{"):
        literal = literal[:-1]  # the last character is optional or repeated
    return literal.encode()


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
            with os.scandir(path) as it:
                entries = list(it)
        except OSError:
            continue
        # Comprehensions over the whole directory: the walk is the cost of a listing.
        files = [e for e in entries if e.is_file(follow_symlinks=False)]
        found.extend(
            FileEntry(e.path, e.stat(follow_symlinks=False).st_mtime)
            for e in files
            if match(relative + e.name)
        )
        pending.extend(
            (e.path, f"{relative}{e.name}/")
            for e in entries
            if e.is_dir(follow_symlinks=False) and e.name != ".git"
        )
    return found


class _Search:
    """One search: the query, what to skip, and what was found so far."""

    def __init__(self, query: SearchQuery, denied: Callable[[str], object]) -> None:
        self.query = query
        self.regex = query.regex
        self.filter = not _LINE_ONLY.search(query.regex.pattern)
        self.literal = required_literal(query.regex)
        self.denied = denied
        self.matches: list[Match] = []
        self.total = 0

    def file(self, path: str) -> None:
        data = _read(path)
        if self.literal not in data or not data or data.find(b"\0", 0, TEXT_PROBE) >= 0:
            return
        text = data.decode("utf-8", "replace")
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        if self.filter:
            self._candidates(path, text)
        else:
            self._lines(path, text)

    def _lines(self, path: str, text: str) -> None:
        """Try every line of ``text``."""
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        search, limit, matches = self.regex.search, self.query.limit, self.matches
        for number, line in enumerate(lines, 1):
            if search(line):
                self.total += 1
                if len(matches) < limit:
                    matches.append(Match(path, number, line))

    def _candidates(self, path: str, text: str) -> None:
        """Find the lines where whole-text matches start, and try only those; a match
        that spans a line break sends the file to the line-by-line search."""
        found: list[tuple[int, str]] = []
        line, position, end = 0, 0, -1
        for match in self.regex.finditer(text):
            start = match.start()
            if "\n" in match.group():
                self._lines(path, text)
                return
            if start <= end:
                continue  # another match on a line already taken
            line += text.count("\n", position, start)
            begin = text.rfind("\n", 0, start) + 1
            end = text.find("\n", start)
            if end < 0:
                end = len(text)
            if begin < len(text):
                found.append((line, text[begin:end]))
            position = begin
        search, limit, matches = self.regex.search, self.query.limit, self.matches
        for number, content in found:
            if search(content):
                self.total += 1
                if len(matches) < limit:
                    matches.append(Match(path, number + 1, content))

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
