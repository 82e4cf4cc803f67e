"""The records of the filesystem seam and the protocols its implementations follow."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "Approve",
    "Change",
    "Commit",
    "CommitHook",
    "FileEntry",
    "FileText",
    "FsBackend",
    "FsPolicy",
    "Listing",
    "Match",
    "MutationKind",
    "Precondition",
    "SearchQuery",
    "SearchResult",
    "Version",
    "WriteOutcome",
]

#: What a mutation is: a whole-file ``write`` or an ``edit`` of the current text.
MutationKind = Literal["write", "edit"]


@dataclass(frozen=True)
class Version:
    """The version of a file's content: equal exactly when the bytes are equal.

    A digest of the content rather than a modification time, so that a change made in
    the same clock tick as a read (coarse file timestamps) is still a change, and a
    ``touch`` that leaves the bytes alone is not.
    """

    digest: str
    size: int

    @classmethod
    def of(cls, data: bytes) -> Version:
        """The version of ``data``."""
        return cls(hashlib.sha256(data).hexdigest(), len(data))


@dataclass(frozen=True)
class FileText:
    """A file read as text: its canonical ``path``, its ``text`` and its ``version``."""

    path: str
    text: str
    version: Version


@dataclass(frozen=True)
class WriteOutcome:
    """What a write or edit did: the canonical ``path``, whether it ``created`` the
    file, and the new ``version``."""

    path: str
    created: bool
    version: Version


@dataclass(frozen=True)
class Change:
    """A mutation about to happen, as an approver sees it: ``before`` is the current
    text (``None`` when the file does not exist; undecodable bytes replaced)."""

    kind: MutationKind
    path: str
    before: str | None
    after: str


#: Asked after every check passed and before anything is written; raising refuses.
Approve = Callable[[Change], Awaitable[None]]


@dataclass(frozen=True)
class Commit:
    """A replace about to happen, as a commit hook sees it: the canonical ``target``,
    its current bytes and version (``None``: it does not exist), the bytes that will
    replace them and their version, and the ``call`` acted for."""

    target: str
    before: bytes | None
    before_version: Version | None
    after: bytes
    after_version: Version
    call: Any


#: Called under the target's lock just before the replace; raising refuses the write.
CommitHook = Callable[[Commit], Awaitable[None]]


@dataclass(frozen=True)
class Precondition:
    """What the target must be just before it is replaced.

    ``any``: whatever it is; ``absent``: it must not exist (the caller has not seen it,
    so an existing file fails ``FS_NOT_OBSERVED``); ``version``: its content must still
    be ``version`` (else ``FS_STALE_VERSION``).
    """

    kind: Literal["any", "absent", "version"]
    version: Version | None = None

    @classmethod
    def any(cls) -> Precondition:
        return cls("any")

    @classmethod
    def absent(cls) -> Precondition:
        return cls("absent")

    @classmethod
    def of(cls, version: Version) -> Precondition:
        return cls("version", version)


@dataclass(frozen=True)
class FileEntry:
    """A file found by a listing: canonical ``path`` and modification time (seconds)."""

    path: str
    mtime: float


@dataclass(frozen=True)
class Listing:
    """The files of a listing, newest first, cut to the limit; ``total`` counts all."""

    files: list[str]
    total: int


@dataclass(frozen=True)
class Match:
    """One matching line: canonical ``path``, 1-based ``line`` number and its ``text``
    (without the line break)."""

    path: str
    line: int
    text: str


@dataclass(frozen=True)
class SearchQuery:
    """What a backend searches for: ``regex`` per line, in the files whose path
    (relative to the searched directory, ``/``-separated) ``include`` accepts; it keeps
    the first ``limit`` matches and counts them all."""

    regex: re.Pattern[str]
    include: Callable[[str], bool] | None
    limit: int


@dataclass(frozen=True)
class SearchResult:
    """The matches of a search in path and line order, cut to the limit; ``total``
    counts every matching line."""

    matches: list[Match]
    total: int


class FsBackend(Protocol):
    """An implementation of the seam (``fs-local`` is one), set with
    ``fs.set_backend``. Paths it is given are canonical unless named ``path``.

    ``call`` is the ``dsh_tools.ToolCall`` on whose behalf the seam acts, or ``None``.
    """

    async def resolve(self, path: str, base: str) -> str:
        """The canonical absolute path of ``path`` (relative to ``base``): the realpath
        of the target, or of its nearest existing ancestor plus the rest."""
        ...

    def check_read(self, target: str, call: Any) -> None:
        """Raise ``FsReadDeniedError`` when ``target`` may not be read."""
        ...

    def check_write(self, target: str, call: Any) -> None:
        """Raise ``FsSandboxDeniedError`` when ``target`` may not be changed."""
        ...

    async def read_bytes(self, target: str) -> bytes | None:
        """The content of ``target``; ``None`` when it does not exist. Raises
        ``FsNotRegularFileError`` for anything but a regular file, and
        ``FsReadDeniedError`` when what it opened may not be read (checked on the file
        opened, so a path changed since ``check_read`` cannot lead it elsewhere)."""
        ...

    async def replace(self, target: str, data: bytes, call: Any) -> None:
        """Atomically make ``data`` the content of ``target`` (creating its parent
        directories), re-checking the target just before it is replaced."""
        ...

    async def list_files(self, directory: str, match: Callable[[str], object]) -> list[FileEntry]:
        """The regular files under ``directory`` whose relative path (``/``-separated)
        ``match`` accepts (returns a true value for); ``.git`` and files that may not
        be read are excluded, symlinks are not followed. Any order."""
        ...

    async def search(self, target: str, query: SearchQuery, call: Any) -> SearchResult:
        """Search the file ``target`` (``FsReadDeniedError`` when it may not be read),
        or the files under the directory ``target`` that ``.gitignore`` files do not
        exclude and that may be read."""
        ...


class FsPolicy(Protocol):
    """A guard over mutations (``fs-policy`` is one), set with ``fs.set_policy``."""

    def precondition(self, kind: MutationKind, target: str, call: Any) -> Precondition:
        """What ``target`` must be for this mutation; may raise to refuse it outright."""
        ...

    def observed(self, target: str, version: Version | None, call: Any) -> None:
        """The caller read ``target`` and saw ``version`` (``None``: it did not exist)."""
        ...

    def written(self, target: str, version: Version, call: Any) -> None:
        """The caller wrote ``target``; its content is now ``version``."""
        ...
