"""The ``Filesystem`` service: paths, text, atomic writes, versions, listing, search."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import attrgetter, methodcaller
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, Service

from ._errors import (
    FsNotFoundError,
    FsNotObservedError,
    FsNotTextError,
    FsSetupError,
    FsStaleVersionError,
    not_observed_message,
    stale_message,
)
from ._glob import compile_glob, split_glob
from ._types import (
    Approve,
    Change,
    Commit,
    CommitHook,
    FileText,
    FsBackend,
    FsPolicy,
    Listing,
    MutationKind,
    Precondition,
    SearchQuery,
    SearchResult,
    Version,
    WriteOutcome,
)

__all__ = ["TEXT_PROBE", "Filesystem", "FilesystemConfig", "session_cwd"]

#: How far into a file a NUL byte marks it as binary.
TEXT_PROBE = 8192

_BACKEND_METHODS = (
    "resolve",
    "check_read",
    "check_write",
    "read_bytes",
    "replace",
    "list_files",
    "search",
)
_POLICY_METHODS = ("precondition", "observed", "written")


def session_cwd(call: Any) -> str:
    """The directory relative paths of ``call`` resolve against: the calling agent's
    session cwd (``call.agent.cwd``), else the process cwd."""
    agent = getattr(call, "agent", None)
    cwd: str | None = getattr(agent, "cwd", None)
    return cwd or os.getcwd()


class FilesystemConfig(BaseModel):
    """Config of the ``fs`` plugin: it has no settings (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class _Lock:
    lock: anyio.Lock
    users: int = 0


class Filesystem(Service):
    """The filesystem seam (ctx key ``fs``).

    It owns the semantics every implementation shares — text decoding, versions,
    preconditions, per-target serialisation, the order of the checks — and hands the
    raw operations to one backend (``set_backend``). An optional policy
    (``set_policy``) decides what each mutation requires and learns what was read and
    written.
    """

    key = "fs"
    name = "fs"
    Config = FilesystemConfig

    def __init__(self, ctx: Context, config: FilesystemConfig) -> None:
        super().__init__(ctx, config)
        self._backend: list[tuple[FsBackend, str]] = []
        self._policy: list[tuple[FsPolicy, str]] = []
        self._locks: dict[str, _Lock] = {}
        self._hooks: list[CommitHook] = []

    # -- wiring -------------------------------------------------------------------------

    def set_backend(self, backend: FsBackend) -> Disposer:
        """Serve the seam with ``backend`` while the caller lives (one at a time);
        returns the exact disposer. Raises :class:`FsSetupError` for a second backend
        or an object missing one of the :class:`FsBackend` methods."""
        return self._install(self._backend, backend, "backend", _BACKEND_METHODS)

    def set_policy(self, policy: FsPolicy) -> Disposer:
        """Guard mutations with ``policy`` while the caller lives (one at a time);
        returns the exact disposer. Raises :class:`FsSetupError` like
        :meth:`set_backend`."""
        return self._install(self._policy, policy, "policy", _POLICY_METHODS)

    def _install(
        self, slot: list[Any], value: object, what: str, methods: tuple[str, ...]
    ) -> Disposer:
        missing = [m for m in methods if not callable(getattr(value, m, None))]
        if missing:
            raise FsSetupError(
                f"a filesystem {what} must have the methods {', '.join(methods)}; "
                f"{value!r} lacks {', '.join(missing)}"
            )
        if slot:
            raise FsSetupError(f'a filesystem {what} is already set (by "{slot[0][1]}")')
        owner = self.ctx.fiber.name

        def body() -> Iterator[Callable[[], None]]:
            slot.append((value, owner))
            yield slot.clear

        return self.ctx.effect(body, label=f"fs {what}")

    def add_commit_hook(self, hook: CommitHook) -> Disposer:
        """Call ``await hook(Commit(...))`` before each replace while the caller lives
        (hooks run in the order they were added); returns the exact disposer.

        A hook runs holding the target's lock, after every check passed, just before
        the backend replaces the file: it sees the exact bytes being replaced. An error
        it raises refuses the write (nothing is replaced, later hooks do not run).
        """
        hooks = self._hooks

        def body() -> Iterator[Callable[[], None]]:
            hooks.append(hook)
            yield lambda: hooks.remove(hook)

        return self.ctx.effect(body, label="fs commit hook")

    @property
    def backend(self) -> FsBackend | None:
        """The backend in use, or ``None``."""
        return self._backend[0][0] if self._backend else None

    @property
    def policy(self) -> FsPolicy | None:
        """The policy in use, or ``None``."""
        return self._policy[0][0] if self._policy else None

    def _require(self) -> FsBackend:
        if not self._backend:
            raise FsSetupError(
                "no filesystem backend is set: add an implementation such as fs-local "
                "to the deployment"
            )
        return self._backend[0][0]

    # -- paths and reads ----------------------------------------------------------------

    async def resolve(self, path: str, call: Any = None) -> str:
        """The canonical absolute path of ``path``; a relative path is relative to
        :func:`session_cwd` of ``call``."""
        return await self._require().resolve(path, session_cwd(call))

    async def read_text(self, path: str, call: Any = None, *, observe: bool = False) -> FileText:
        """Read ``path`` as UTF-8 text.

        Raises ``FsReadDeniedError`` (a ``deny_read`` match), ``FsNotFoundError``,
        ``FsNotRegularFileError`` and ``FsNotTextError`` (a NUL byte in the first 8 KiB,
        or invalid UTF-8). With ``observe`` the policy learns what the caller saw —
        the version, or that the file does not exist — as a read by the model does.
        """
        backend = self._require()
        target = await backend.resolve(path, session_cwd(call))
        backend.check_read(target, call)
        data = await backend.read_bytes(target)
        if data is None:
            self._observed(observe, target, None, call)
            raise FsNotFoundError(f'cannot read "{target}": not found', target)
        version = Version.of(data)
        self._observed(observe, target, version, call)
        return FileText(target, _decode(data, target), version)

    def _observed(self, observe: bool, target: str, version: Version | None, call: Any) -> None:
        policy = self.policy
        if observe and policy is not None:
            policy.observed(target, version, call)

    async def version(self, path: str, call: Any = None) -> Version | None:
        """The version of ``path``'s content, or ``None`` when it does not exist
        (stable while the file is unchanged)."""
        backend = self._require()
        target = await backend.resolve(path, session_cwd(call))
        backend.check_read(target, call)
        data = await backend.read_bytes(target)
        return None if data is None else Version.of(data)

    # -- mutations ----------------------------------------------------------------------

    async def write_text(
        self, path: str, text: str, call: Any = None, *, approve: Approve | None = None
    ) -> WriteOutcome:
        """Make ``text`` the whole content of ``path`` (UTF-8), atomically.

        In order: the backend's sandbox check (``FsSandboxDeniedError``), the policy's
        precondition (``FsNotObservedError`` / ``FsStaleVersionError``), ``approve``
        (its error propagates), then, serialised with other writes of the same
        target, the sandbox and precondition again and the atomic replace. The policy
        learns the new version.
        """
        backend = self._require()
        target = await backend.resolve(path, session_cwd(call))
        backend.check_write(target, call)
        precondition = self._precondition("write", target, call)
        current = await backend.read_bytes(target)
        _check(precondition, target, _version(current), "write")
        if approve is not None:
            await approve(Change("write", target, _lenient(current), text))
        return await self._commit(backend, target, text, precondition, call)

    async def edit_text(
        self,
        path: str,
        change: Callable[[str, str], str],
        call: Any = None,
        *,
        approve: Approve | None = None,
    ) -> WriteOutcome:
        """Replace the text of ``path`` with ``change(target, text)``, atomically
        (``target`` is the canonical path).

        The checks of :meth:`write_text` apply (an edit of a file never read fails
        ``FsNotObservedError``), then the current text is read (``FsNotFoundError``,
        ``FsNotTextError``) and ``change`` computes the new one (its error
        propagates). The write succeeds only if the file still holds the text that was
        changed (else ``FsStaleVersionError``).
        """
        backend = self._require()
        target = await backend.resolve(path, session_cwd(call))
        backend.check_write(target, call)
        precondition = self._precondition("edit", target, call)
        current = await backend.read_bytes(target)
        version = _version(current)
        _check(precondition, target, version, "edit")
        if current is None or version is None:
            raise FsNotFoundError(f'cannot edit "{target}": not found', target)
        before = _decode(current, target)
        after = change(target, before)
        if approve is not None:
            await approve(Change("edit", target, before, after))
        return await self._commit(backend, target, after, Precondition.of(version), call)

    def _precondition(self, kind: MutationKind, target: str, call: Any) -> Precondition:
        policy = self.policy
        return Precondition.any() if policy is None else policy.precondition(kind, target, call)

    async def _commit(
        self, backend: FsBackend, target: str, text: str, precondition: Precondition, call: Any
    ) -> WriteOutcome:
        data = text.encode("utf-8")
        async with self._locked(target):
            moved = await backend.resolve(target, "/")
            if moved != target:
                backend.check_write(moved, call)
                raise FsStaleVersionError(stale_message(target), target)
            current = await backend.read_bytes(target)
            previous = _version(current)
            _check(precondition, target, previous, "write")
            version = Version.of(data)
            if self._hooks:
                commit = Commit(target, current, previous, data, version, call)
                for hook in list(self._hooks):
                    await hook(commit)
            await backend.replace(target, data, call)
        policy = self.policy
        if policy is not None:
            policy.written(target, version, call)
        return WriteOutcome(target, current is None, version)

    def _locked(self, target: str) -> _Held:
        entry = self._locks.get(target)
        if entry is None:
            entry = self._locks[target] = _Lock(anyio.Lock())
        return _Held(self._locks, target, entry)

    # -- listing and search -------------------------------------------------------------

    async def list_files(
        self, pattern: str, path: str | None = None, call: Any = None, *, limit: int = 100
    ) -> Listing:
        """The regular files matching the glob ``pattern`` (relative to ``path``,
        default :func:`session_cwd`), newest first, at most ``limit``; ``.git`` is
        excluded. A pattern may start with literal directories (``src/**/*.py``) or be
        absolute. Raises ``FsNotFoundError``, ``FsNotDirectoryError``, and
        ``ValueError`` for a malformed pattern."""
        backend = self._require()
        prefix, rest = split_glob(pattern)
        start = path or session_cwd(call)
        if prefix:
            start = os.path.join(start, prefix)
        directory = await backend.resolve(start, session_cwd(call))
        entries = await backend.list_files(directory, _matcher(rest or pattern))
        # Newest first, by path among equals (two stable sorts on C-level keys).
        entries.sort(key=attrgetter("path"))
        entries.sort(key=attrgetter("mtime"), reverse=True)
        return Listing([e.path for e in entries[:limit]], len(entries))

    async def search(
        self,
        pattern: str,
        path: str | None = None,
        call: Any = None,
        *,
        glob: str | None = None,
        case_insensitive: bool = False,
        limit: int = 250,
    ) -> SearchResult:
        """The lines matching the regular expression ``pattern`` (Python syntax) in
        the file or directory ``path`` (default :func:`session_cwd`), honouring
        ``.gitignore`` files; ``glob`` keeps only the files it matches (a pattern
        without ``/`` matches the file name, else the path relative to ``path``).
        Raises ``re.error`` and ``ValueError`` for malformed patterns, and the errors
        of :meth:`list_files`."""
        backend = self._require()
        target = await backend.resolve(path or session_cwd(call), session_cwd(call))
        regex = re.compile(pattern, re.MULTILINE | (re.IGNORECASE if case_insensitive else 0))
        include = None if glob is None else _include(glob)
        return await backend.search(target, SearchQuery(regex, include, limit), call)


class _Held:
    """The per-target lock, held for one commit; the entry goes once nobody uses it."""

    def __init__(self, table: dict[str, _Lock], target: str, entry: _Lock) -> None:
        self.table, self.target, self.entry = table, target, entry

    async def __aenter__(self) -> None:
        self.entry.users += 1
        try:
            await self.entry.lock.acquire()
        except BaseException:
            self._release_user()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self.entry.lock.release()
        self._release_user()

    def _release_user(self) -> None:
        self.entry.users -= 1
        if not self.entry.users:
            del self.table[self.target]


#: ``**/*<suffix>``: any file whose name ends with a literal suffix.
_ANY_DEPTH_SUFFIX = re.compile(r"\*\*/\*([^*?\[\]{}\\/]+)")


def _matcher(pattern: str) -> Callable[[str], object]:
    """What a relative path must satisfy to match ``pattern`` (the most common shape,
    ``**/*.py``, is a suffix test: a listing calls this once per file)."""
    suffix = _ANY_DEPTH_SUFFIX.fullmatch(pattern)
    if suffix is not None:
        return methodcaller("endswith", suffix.group(1))
    return compile_glob(pattern).fullmatch


def _include(glob: str) -> Callable[[str], bool]:
    regex = compile_glob(glob)
    if "/" in glob:
        return lambda rel: regex.fullmatch(rel) is not None
    return lambda rel: regex.fullmatch(rel.rpartition("/")[2]) is not None


def _version(data: bytes | None) -> Version | None:
    return None if data is None else Version.of(data)


def _check(precondition: Precondition, target: str, current: Version | None, kind: str) -> None:
    if precondition.kind == "absent":
        if current is not None:
            raise FsNotObservedError(not_observed_message(kind, target), target)
    elif precondition.kind == "version" and current != precondition.version:
        raise FsStaleVersionError(stale_message(target), target)


def _decode(data: bytes, target: str) -> str:
    if b"\0" in data[:TEXT_PROBE]:
        raise FsNotTextError(f'cannot read "{target}" as text: it is binary (a NUL byte)', target)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FsNotTextError(
            f'cannot read "{target}" as text: it is not valid UTF-8 (byte {exc.start})', target
        ) from None


def _lenient(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")
