"""The ``fs`` seam on its own: wiring, the order of checks, versions, serialisation."""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Callable
from typing import Any

import anyio
import pytest

import dsh_fs
from dsh import ConfigError, Context, Disposer
from dsh.testing import until
from dsh_fs import (
    Change,
    FileEntry,
    Filesystem,
    FsNotFoundError,
    FsNotObservedError,
    FsSandboxDeniedError,
    FsSetupError,
    FsStaleVersionError,
    Listing,
    Match,
    Precondition,
    SearchQuery,
    SearchResult,
    Version,
    session_cwd,
)
from dsh_fs_local import FsLocal
from dsh_fs_policy import ObservationPolicy
from dsh_system_prompt import SystemPrompt
from dsh_tool_fs import FsTools
from dsh_tools import Tools
from tests.plugins.fs.fs_support import Layout, agent_call, fs_stack, run

pytestmark = pytest.mark.anyio


class MemoryBackend:
    """A backend over a dict: canonical paths are the given ones, ``/ro/`` is fenced."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.calls: list[str] = []
        self.gate: anyio.Event | None = None

    async def resolve(self, path: str, base: str) -> str:
        return path if path.startswith("/") else f"{base}/{path}"

    def check_read(self, target: str, call: Any) -> None:
        self.calls.append(f"check_read {target}")

    def check_write(self, target: str, call: Any) -> None:
        self.calls.append(f"check_write {target}")
        if target.startswith("/ro/"):
            raise FsSandboxDeniedError(f"read-only: {target}", target)

    async def read_bytes(self, target: str) -> bytes | None:
        return self.files.get(target)

    async def replace(self, target: str, data: bytes, call: Any) -> None:
        self.calls.append(f"replace {target}")
        if self.gate is not None:
            await self.gate.wait()
        self.files[target] = data

    async def list_files(self, directory: str, match: Callable[[str], object]) -> list[FileEntry]:
        found = [
            FileEntry(path, float(len(data)))
            for path, data in self.files.items()
            if path.startswith(directory + "/") and match(path[len(directory) + 1 :])
        ]
        return found

    async def search(self, target: str, query: SearchQuery, call: Any) -> SearchResult:
        matches = [
            Match(path, 1, data.decode())
            for path, data in sorted(self.files.items())
            if query.regex.search(data.decode())
            and (query.include is None or query.include(path[len(target) + 1 :]))
        ]
        return SearchResult(matches[: query.limit], len(matches))


class Recorder:
    """A policy that records what it is told and asks for a fixed precondition."""

    def __init__(self, precondition: Precondition) -> None:
        self.answer = precondition
        self.events: list[tuple[str, str, Version | None]] = []

    def precondition(self, kind: str, target: str, call: Any) -> Precondition:
        self.events.append((kind, target, None))
        return self.answer

    def observed(self, target: str, version: Version | None, call: Any) -> None:
        self.events.append(("observed", target, version))

    def written(self, target: str, version: Version, call: Any) -> None:
        self.events.append(("written", target, version))


async def seam(root: Context, backend: MemoryBackend | None = None) -> MemoryBackend:
    await root.plugin(Filesystem)
    backend = backend or MemoryBackend()
    root.fs.set_backend(backend)
    return backend


def test_exports_and_entry_points() -> None:
    assert dsh_fs.plugin is Filesystem
    assert (Filesystem.key, Filesystem.name) == ("fs", "fs")
    points = {e.name: e.load() for e in importlib.metadata.entry_points(group="dsh.plugins")}
    assert points["fs"] is Filesystem
    assert points["fs-local"] is FsLocal
    assert points["fs-policy"] is ObservationPolicy
    assert points["tool-fs"] is FsTools


def test_preconditions_and_versions() -> None:
    version = Version.of(b"abc")
    assert version == Version.of(b"abc") != Version.of(b"abd")
    assert version.size == 3
    assert Precondition.any() == Precondition("any")
    assert Precondition.absent() == Precondition("absent")
    assert Precondition.of(version) == Precondition("version", version)


def test_session_cwd_falls_back_to_the_process_cwd() -> None:
    assert session_cwd(agent_call("/w")) == "/w"
    assert session_cwd(agent_call(None)) == os.getcwd()
    assert session_cwd(None) == os.getcwd()


async def test_backend_and_policy_are_one_at_a_time_and_undone() -> None:
    async with Context() as root:
        await root.plugin(Filesystem)
        fs = root.fs
        assert (fs.backend, fs.policy) == (None, None)
        backend, policy = MemoryBackend(), Recorder(Precondition.any())
        set_backend: Disposer = fs.set_backend(backend)
        set_policy: Disposer = fs.set_policy(policy)
        assert isinstance(set_backend, Disposer)
        assert (fs.backend, fs.policy) == (backend, policy)
        with pytest.raises(
            FsSetupError, match=r'^a filesystem backend is already set \(by "root"\)$'
        ):
            fs.set_backend(MemoryBackend())
        with pytest.raises(FsSetupError, match=r"^a filesystem policy is already set"):
            fs.set_policy(Recorder(Precondition.any()))
        await set_backend()
        await set_policy()
        assert (fs.backend, fs.policy) == (None, None)


async def test_a_backend_missing_methods_is_refused_by_name() -> None:
    async with Context() as root:
        await root.plugin(Filesystem)
        with pytest.raises(FsSetupError) as caught:
            root.fs.set_backend(object())
        assert str(caught.value).endswith(
            "lacks resolve, check_read, check_write, read_bytes, replace, list_files, search"
        )
        with pytest.raises(FsSetupError, match=r"lacks observed, written$"):
            root.fs.set_policy(type("Half", (), {"precondition": lambda self: None})())
        assert root.fs.backend is None


async def test_without_a_backend_every_operation_says_what_to_add(ws: Layout) -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Filesystem)
        await root.plugin(FsTools)
        result = await run(root, "read", ws.call(), file_path="a")
        with pytest.raises(FsSetupError):
            await root.fs.resolve("a")
    assert (result.content, result.code) == (
        "Error: no filesystem backend is set: add an implementation such as fs-local to the "
        "deployment",
        "FS_SETUP",
    )


async def test_the_seam_config_takes_no_keys() -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match="Extra inputs are not permitted"):
            await root.plugin(Filesystem, {"root": "/"})


async def test_reads_resolve_against_the_session_cwd_and_observe_only_when_asked() -> None:
    async with Context() as root:
        backend = await seam(root)
        policy = Recorder(Precondition.any())
        root.fs.set_policy(policy)
        backend.files["/w/a.txt"] = b"hi\n"
        call = agent_call("/w")
        quiet = await root.fs.read_text("a.txt", call)
        seen = await root.fs.read_text("a.txt", call, observe=True)
        with pytest.raises(FsNotFoundError, match=r'^cannot read "/w/b\.txt": not found$'):
            await root.fs.read_text("b.txt", call, observe=True)
        assert await root.fs.version("a.txt", call) == Version.of(b"hi\n")
        assert await root.fs.version("/w/b.txt") is None
    assert quiet == seen
    assert (quiet.path, quiet.text, quiet.version) == ("/w/a.txt", "hi\n", Version.of(b"hi\n"))
    assert policy.events == [
        ("observed", "/w/a.txt", Version.of(b"hi\n")),
        ("observed", "/w/b.txt", None),
    ]


async def test_a_write_checks_the_sandbox_then_the_policy_then_asks() -> None:
    async with Context() as root:
        backend = await seam(root)
        policy = Recorder(Precondition.absent())
        root.fs.set_policy(policy)
        changes: list[Change] = []

        async def approve(change: Change) -> None:
            changes.append(change)

        with pytest.raises(FsSandboxDeniedError):
            await root.fs.write_text("/ro/x", "x", approve=approve)
        assert policy.events == []  # the sandbox refused before the policy was asked
        outcome = await root.fs.write_text("/w/new", "text", approve=approve)
        backend.files["/w/old"] = b"\xff old"
        with pytest.raises(FsNotObservedError):
            await root.fs.write_text("/w/old", "y", approve=approve)
    assert (outcome.path, outcome.created, outcome.version) == (
        "/w/new",
        True,
        Version.of(b"text"),
    )
    assert changes == [Change("write", "/w/new", None, "text")]
    assert policy.events == [
        ("write", "/w/new", None),
        ("written", "/w/new", Version.of(b"text")),
        ("write", "/w/old", None),
    ]
    assert backend.calls == [
        "check_write /ro/x",
        "check_write /w/new",
        "replace /w/new",
        "check_write /w/old",
    ]


async def test_a_change_while_asking_is_caught_before_writing() -> None:
    async with Context() as root:
        backend = await seam(root)
        backend.files["/w/f"] = b"one"

        async def meanwhile(change: Change) -> None:
            backend.files["/w/f"] = b"two"

        with pytest.raises(FsStaleVersionError, match=r'^"/w/f" changed since it was read'):
            await root.fs.edit_text("/w/f", lambda path, text: text + "!", approve=meanwhile)
        outcome = await root.fs.edit_text("/w/f", lambda path, text: f"{path}:{text}")
    assert backend.files["/w/f"] == b"/w/f:two"
    assert outcome.created is False


async def test_writes_of_one_target_are_serialised_and_the_lock_goes_away() -> None:
    async with Context() as root:
        backend = await seam(root)
        backend.gate = anyio.Event()
        fs = root.fs
        async with anyio.create_task_group() as group:
            group.start_soon(fs.write_text, "/w/f", "first")
            group.start_soon(fs.write_text, "/w/f", "second")
            group.start_soon(fs.write_text, "/w/g", "other")
            # Both targets are being replaced and the second write of /w/f holds a share
            # of its lock: it waits its turn instead of replacing the file meanwhile.
            await until(
                lambda: (
                    backend.calls.count("replace /w/g") == 1
                    and "replace /w/f" in backend.calls
                    and fs._locks["/w/f"].users == 2
                )
            )
            assert backend.calls.count("replace /w/f") == 1
            backend.gate.set()
        assert fs._locks == {}
    assert backend.files["/w/f"] in (b"first", b"second")


async def test_a_write_cancelled_while_waiting_for_the_lock_leaves_nothing() -> None:
    async with Context() as root:
        backend = await seam(root)
        backend.gate = anyio.Event()
        fs = root.fs
        async with anyio.create_task_group() as group:
            group.start_soon(fs.write_text, "/w/f", "first")
            await until(lambda: "replace /w/f" in backend.calls)
            with anyio.CancelScope() as waiting:
                waiting.cancel()
                await fs.write_text("/w/f", "second")
            assert fs._locks["/w/f"].users == 1
            backend.gate.set()
        assert fs._locks == {}
    assert backend.files["/w/f"] == b"first"


async def test_listing_sorts_newest_first_and_search_passes_the_query() -> None:
    async with Context() as root:
        backend = await seam(root)
        backend.files.update({"/w/a.py": b"x", "/w/b.py": b"xyz", "/w/c.txt": b"xy"})
        listing = await root.fs.list_files("*.py", "/w", limit=1)
        everything = await root.fs.list_files("*", "/w")
        result = await root.fs.search("X", "/w", case_insensitive=True, glob="*.py", limit=5)
        plain = await root.fs.search("y", "/w")
    assert listing == Listing(["/w/b.py"], 2)
    assert everything.files == ["/w/b.py", "/w/c.txt", "/w/a.py"]
    assert [m.path for m in result.matches] == ["/w/a.py", "/w/b.py"]
    assert plain.total == 2


async def test_search_patterns_are_python_regexes() -> None:
    async with Context() as root:
        await seam(root)
        with pytest.raises(re.error):
            await root.fs.search("(", "/w")


async def test_a_real_stack_reports_versions_that_follow_the_content(ws: Layout) -> None:
    target = ws.root / "f.txt"
    target.write_text("one")
    async with fs_stack(tools=False) as root:
        first = await root.fs.version(str(target))
        os.utime(target, (1, 1))
        touched = await root.fs.version(str(target))
        target.write_text("two")
        changed = await root.fs.version(str(target))
    assert first == touched != changed


async def test_an_any_depth_suffix_pattern_means_what_the_glob_means() -> None:
    async with Context() as root:
        backend = await seam(root)
        for path in ("/w/a.py", "/w/d/e/b.py", "/w/c.pyc", "/w/x.py/y", "/w/.py"):
            backend.files[path] = b"x"
        suffix = await root.fs.list_files("**/*.py", "/w")
        general = await root.fs.list_files("**/*.p[y]", "/w")
    assert sorted(suffix.files) == sorted(general.files) == ["/w/.py", "/w/a.py", "/w/d/e/b.py"]
