"""Listing and searching directory trees (run in a worker thread).

Both walk with directory descriptors: each directory is opened relative to its parent
and each searched file relative to its directory, following no symlink, so an entry
swapped for a symlink meanwhile is skipped, never followed. A file the fence denies —
by its path, or as a hard link of a denied file — is neither listed nor searched.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from typing import TypeVar

import anyio.from_thread

from dsh_fs import (
    TEXT_PROBE,
    FileEntry,
    FsIOError,
    FsNotDirectoryError,
    FsNotFoundError,
    FsNotRegularFileError,
    Match,
    SearchQuery,
    SearchResult,
)

from ._deny import DeniedFiles
from ._fence import Fence
from ._ignore import Ignores, ignored, load_ignores, with_directory
from ._paths import open_canonical, read_all

__all__ = ["kind_of", "list_files", "required_literal", "search"]

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
#: The leading characters of a pattern that match only themselves.
_LITERAL = re.compile(r"[^.^$*+?{}\[\]\\|()\r\n\ufffd]*")

#: Pattern features whose meaning differs between a whole text and one line: with
#: them, every line is tried; without them, a file the whole-text search misses is
#: skipped at once.
_LINE_ONLY = re.compile(r"\\[AZ]|\(\?<[=!]|\(\?!|\(\?[a-zA-Z]*-")

_Context = TypeVar("_Context")
#: One directory's visit: ``(fd, path, relative, context)`` in, the subdirectories to
#: enter out (each yielded when it is to be entered, with the context of its visit).
_Visit = Callable[[int, str, str, _Context], Iterator[tuple[str, _Context]]]


def _walk(fd: int, path: str, context: _Context, visit: _Visit[_Context]) -> None:
    """Depth first from the directory open at ``fd`` (closed at the end): one
    descriptor open per level, each subdirectory opened relative to its parent
    without following a symlink (one that cannot be opened is skipped)."""
    stack = [(fd, path, "", visit(fd, path, "", context))]
    try:
        while stack:
            fd, path, relative, subdirectories = stack[-1]
            entry = next(subdirectories, None)
            if entry is None:
                stack.pop()
                os.close(fd)
                continue
            anyio.from_thread.check_cancelled()
            name, inner = entry
            try:
                child = os.open(name, _DIRECTORY, dir_fd=fd)
            except OSError:  # swapped for a symlink or a file, gone, unreadable
                continue
            below, deeper = f"{path.rstrip('/')}/{name}", f"{relative}{name}/"
            stack.append((child, below, deeper, visit(child, below, deeper, inner)))
    finally:
        for fd, _, _, _ in stack:
            os.close(fd)


def _entries(fd: int) -> list[os.DirEntry[str]]:
    """The entries of the directory open at ``fd`` (none when it cannot be read)."""
    try:
        with os.scandir(fd) as it:
            return list(it)
    except OSError:
        return []


def _open_top(target: str, flags: int, verb: str) -> tuple[int, str]:
    """A descriptor of the canonical ``target`` and the path it was opened at."""
    try:
        return open_canonical(target, flags)
    except FileNotFoundError:
        raise FsNotFoundError(f'cannot {verb} "{target}": not found', target) from None
    except NotADirectoryError:
        raise FsNotDirectoryError(f'cannot {verb} "{target}": not a directory', target) from None
    except OSError as exc:
        raise FsIOError(f'cannot {verb} "{target}": {exc.strerror}', target) from exc


def _read_target(fd: int, target: str) -> bytes:
    try:
        return read_all(fd)
    except OSError as exc:
        raise FsIOError(f'cannot search "{target}": {exc.strerror}', target) from exc


class _Links:
    """The denied files by identity, scanned when a file with other links is met."""

    def __init__(self, fence: Fence) -> None:
        self.fence = fence
        self.files: DeniedFiles | None = None

    def denied(self, path: str, st: os.stat_result) -> bool:
        """Whether the file ``path`` (``st``: it has other links) is a denied one's."""
        if self.files is None:
            self.files = self.fence.denied_files()
        return self.files.reason(path, st) is not None


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


def list_files(directory: str, match: Callable[[str], object], fence: Fence) -> list[FileEntry]:
    """The regular files under ``directory`` whose relative path ``match`` accepts and
    that ``fence`` does not deny."""
    fd, directory = _open_top(directory, os.O_RDONLY | os.O_DIRECTORY, "list")
    found: list[FileEntry] = []
    links = _Links(fence)

    def visit(fd: int, path: str, relative: str, context: None) -> Iterator[tuple[str, None]]:
        entries = _entries(fd)
        prefix, denied = f"{path.rstrip('/')}/", fence.screen(path)
        # Comprehensions over the whole directory: the walk is the cost of a listing.
        matched = [
            (prefix + e.name, e.stat(follow_symlinks=False))
            for e in entries
            if e.is_file(follow_symlinks=False) and match(relative + e.name)
        ]
        found.extend(
            FileEntry(name, st.st_mtime)
            for name, st in matched
            if (denied is None or not denied(name))
            and (st.st_nlink < 2 or not links.denied(name, st))
        )
        subdirectories = [
            e.name for e in entries if e.is_dir(follow_symlinks=False) and e.name != ".git"
        ]
        for name in subdirectories:
            yield name, None

    _walk(fd, directory, None, visit)
    return found


class _Search:
    """One search: the query, what to skip, and what was found so far."""

    def __init__(self, query: SearchQuery, fence: Fence) -> None:
        self.query = query
        self.regex = query.regex
        self.filter = not _LINE_ONLY.search(query.regex.pattern)
        self.literal = required_literal(query.regex)
        self.fence = fence
        self.links = _Links(fence)
        self.matches: list[Match] = []
        self.total = 0

    def file_at(self, directory: int, name: str, path: str) -> None:
        """Search the file ``name`` of the directory open at ``directory`` (skipped
        when it is no longer a regular file, or is a hard link of a denied file)."""
        try:
            fd = os.open(name, _READ, dir_fd=directory)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_nlink > 1 and self.links.denied(path, st)):
                return
            data = read_all(fd)
        except OSError:
            return
        finally:
            os.close(fd)
        self.text(path, data)

    def text(self, path: str, data: bytes) -> None:
        """Search the content ``data`` of ``path`` (skipped when binary)."""
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

    def tree(self, fd: int, root: str) -> None:
        """Search the files under the directory open at ``fd`` (canonical ``root``),
        depth first, each directory's entries by name; ``.git``, ignored and denied
        files are skipped."""
        _walk(fd, root, load_ignores(root), self._directory)

    def _directory(
        self, fd: int, path: str, relative: str, ignores: Ignores
    ) -> Iterator[tuple[str, Ignores]]:
        include = self.query.include
        ignores = with_directory(ignores, path, fd)
        prefix, denied = f"{path.rstrip('/')}/", self.fence.screen(path)
        items: list[tuple[str, bool]] = []
        for entry in sorted(_entries(fd), key=lambda e: e.name):
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                if name != ".git" and not ignored(ignores, prefix + name, True):
                    items.append((name, True))
            elif (
                entry.is_file(follow_symlinks=False)
                and (include is None or include(relative + name))
                and not ignored(ignores, prefix + name, False)
                and (denied is None or not denied(prefix + name))
            ):
                items.append((name, False))
        for name, is_dir in items:
            if is_dir:
                yield name, ignores
            else:
                self.file_at(fd, name, prefix + name)


def search(target: str, query: SearchQuery, fence: Fence) -> SearchResult:
    """The matches of ``query`` in the file or directory ``target``. A file the fence
    denies is refused when it is the target (``FsReadDeniedError``) and skipped under
    a directory."""
    fd, target = _open_top(target, os.O_RDONLY | os.O_NONBLOCK, "search")
    run = _Search(query, fence)
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        run.tree(fd, target)  # the walk closes fd
        return SearchResult(run.matches, run.total)
    try:
        if not stat.S_ISREG(st.st_mode):
            raise FsNotRegularFileError(
                f'cannot search "{target}": it is {kind_of(st.st_mode)}', target
            )
        fence.check_opened(target, st)
        data = _read_target(fd, target)
    finally:
        os.close(fd)
    run.text(target, data)
    return SearchResult(run.matches, run.total)
