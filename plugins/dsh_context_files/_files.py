"""Finding, reading and rendering the context files of a working directory.

Each assembly looks the files up again (two ``stat`` calls per folder) and reads a
file only when its identity, size or times changed since it was last read: an edit
shows in the next request, and an unchanged tree costs a few microseconds per folder.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import stat
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = [
    "FILE_NAMES",
    "PREAMBLE",
    "ContextFile",
    "FileCache",
    "StatCache",
    "folders",
    "render",
    "stat_signature",
]

_log = logging.getLogger("dsh.context-files")

T = TypeVar("T")

#: The names looked for in each folder, in this order.
FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
#: The first line of the project context, before the files.
PREAMBLE = (
    "Project instructions from the AGENTS.md and CLAUDE.md files of the working directory "
    "and the folders above it, outermost first (a later file is more specific). Each "
    "file is quoted between <file> tags that name its path."
)


@dataclass(frozen=True, slots=True)
class ContextFile:
    """One file's text as read: at most the cap's bytes (``truncated`` when the file
    is longer); ``size`` is the number of bytes that text is."""

    path: str
    text: str
    size: int
    truncated: bool


def folders(cwd: str, root: str | None) -> list[str]:
    """The folders whose files apply to ``cwd``, farthest first: from ``root`` (when
    ``cwd`` is inside it, ``root`` included) or else the filesystem root, down to
    ``cwd`` itself. Paths are canonical (symlinks resolved)."""
    chain = [os.path.realpath(cwd)]
    while (parent := os.path.dirname(chain[-1])) != chain[-1]:
        chain.append(parent)
    if root is not None and root in chain:
        del chain[chain.index(root) + 1 :]
    chain.reverse()
    return chain


def stat_signature(info: os.stat_result) -> tuple[int, ...]:
    """What tells one version of a file from another without reading it: device, inode,
    size and the modification and change times (in nanoseconds)."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _decode(data: bytes, truncated: bool) -> tuple[str, int]:
    """The text of ``data`` and how many of its bytes it holds (a character cut by the
    cap is left out). Raises ``UnicodeDecodeError``."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    text = decoder.decode(data, final=not truncated)
    size = len(data) - len(decoder.getstate()[0])
    if text.startswith("\ufeff"):  # a byte order mark is not part of the text
        text = text[1:]
    return text, size


class StatCache(Generic[T]):
    """What was made of files so far, each kept with the :func:`stat_signature` its file
    had: :meth:`get` costs one ``stat`` while a file is unchanged and reads it again
    (:meth:`_read`, a subclass's) when it changed. A path that is not a regular file is
    None; a path gone is forgotten."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[tuple[int, ...], T | None]] = {}
        #: How many times a file was read (not served from the cache).
        self.reads = 0

    def get(self, path: str) -> T | None:
        """What :meth:`_read` made of the file at ``path``, read again only if the file
        changed since; None when it is not a regular file (or ``_read`` skipped it)."""
        try:
            info = os.stat(path)
        except OSError:
            self._files.pop(path, None)
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        signature = stat_signature(info)
        cached = self._files.get(path)
        if cached is not None and cached[0] == signature:
            return cached[1]
        self.reads += 1
        found = self._read(path)
        self._files[path] = (signature, found)
        return found

    @abstractmethod
    def _read(self, path: str) -> T | None:
        """What the file at ``path`` holds, or None to skip it (warning why)."""


class FileCache(StatCache[ContextFile]):
    """The context files read so far; ``limit`` is the most bytes of one file that are
    read (the cap). A file skipped for its content or permissions is warned about once
    per change."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def _read(self, path: str) -> ContextFile | None:
        try:
            # Non-blocking: a FIFO put there after the stat must not hang the loop.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            _log.warning("skipped context file %s: cannot read it (%s)", path, exc.strerror)
            return None
        with contextlib.closing(os.fdopen(fd, "rb")) as file:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = file.read(self.limit + 1)
        truncated = len(data) > self.limit
        try:
            text, size = _decode(data[: self.limit], truncated)
        except UnicodeDecodeError as exc:
            _log.warning(
                "skipped context file %s: it is not UTF-8 text (%s at byte %d)",
                path,
                exc.reason,
                exc.start,
            )
            return None
        return ContextFile(path, text, size, truncated)


def _cut(text: str, size: int) -> str:
    """``text`` cut to at most ``size`` bytes of UTF-8, on a character boundary."""
    return text.encode()[:size].decode("utf-8", "ignore")


def render(files: Sequence[ContextFile], max_bytes: int) -> str:
    """The value of ``{{project_context}}``: the preamble, then each file quoted with
    its path; at most ``max_bytes`` bytes of the files' texts, the rest replaced by a
    marker naming what is not shown. Empty for no files."""
    if not files:
        return ""
    parts = [PREAMBLE]
    room = max_bytes
    for index, file in enumerate(files):
        text, cut = file.text, file.truncated
        if file.size > room:
            text, cut = _cut(text, room), True
        room -= min(file.size, room)
        if cut:
            rest = [f"the rest of {file.path}", *(f.path for f in files[index + 1 :])]
            text += (
                f"\n[truncated: the context files are capped at {max_bytes} bytes; not shown: "
                f"{', '.join(rest)}]"
            )
        parts.append(f'<file path="{file.path}">\n{text}\n</file>')
        if cut:
            break
    return "\n\n".join(parts)
