"""``fs-local`` on disk: atomic writes and their failures, walks, search details,
and its config."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest

import dsh_fs_local
import dsh_fs_local._paths as paths
import dsh_fs_local._walk as walk
from dsh import ConfigError, Context
from dsh_fs import Filesystem
from dsh_fs_local import DEFAULT_DENY_READ, Fence, FsLocal, FsLocalConfig, LocalBackend
from dsh_fs_local._walk import required_literal
from tests.plugins.fs.fs_support import Layout, fs_stack, run

pytestmark = pytest.mark.anyio


def test_exports() -> None:
    assert dsh_fs_local.plugin is FsLocal
    assert (FsLocal.name, tuple(FsLocal.inject)) == ("fs-local", ("fs",))
    assert DEFAULT_DENY_READ == ("~/.ssh/**", "~/.aws/**", "~/.gnupg/**")


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"mode": "sandbox"}, "(at mode)"),
        ({"deny_read": ["*.pem"]}, "deny_read pattern '*.pem' must be absolute or start with ~"),
        ({"deny_read": ["/a", "/b/[x"]}, "(at deny_read.1)"),
        ({"root": "/no/such/dir"}, "root '/no/such/dir' is not a directory (at root)"),
        ({"roots": ["/"]}, "(at roots)"),
    ],
)
async def test_bad_configs_are_located(config: dict[str, Any], problem: str) -> None:
    async with Context() as root:
        await root.plugin(Filesystem)
        with pytest.raises(ConfigError) as caught:
            await root.plugin(FsLocal, config)
    assert "fs-local" in str(caught.value)
    assert problem in str(caught.value)


async def test_the_plugin_sets_and_unsets_the_backend() -> None:
    async with Context() as root:
        await root.plugin(Filesystem)
        fiber = root.plugin(FsLocal)
        await fiber
        assert isinstance(root.fs.backend, LocalBackend)
        await fiber.dispose()
        assert root.fs.backend is None


async def test_a_failed_write_leaves_no_temp_file(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:

    real_write = os.write

    def full(fd: int, data: Any) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".dsh-tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    async with fs_stack() as root:
        result = await run(root, "write", ws.call(), file_path="f.txt", content="x")
    assert (result.content, result.code) == (
        f'Error: cannot write "{ws.root}/f.txt": No space left on device',
        "FS_IO",
    )
    assert list(ws.root.iterdir()) == []


async def test_writing_under_a_file_is_an_io_error(ws: Layout) -> None:
    (ws.root / "file").write_text("")
    async with fs_stack() as root:
        result = await run(root, "write", ws.call(), file_path="file/x.txt", content="x")
        onto_dir = await run(root, "write", ws.call(), file_path=".", content="x")
    assert (result.content, result.code) == (
        f'Error: cannot write "{ws.root}/file/x.txt": Not a directory',
        "FS_IO",
    )
    assert (onto_dir.content, onto_dir.code) == (
        f'Error: "{ws.root}" is not a regular file: it is a directory',
        "FS_NOT_REGULAR_FILE",
    )


async def test_an_unreadable_file_is_an_io_error(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "locked").write_text("x")
    real_open = paths.open_exact

    def refuse(path: str, flags: int) -> int:
        if path.endswith("locked"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags)

    monkeypatch.setattr(paths, "open_exact", refuse)
    async with fs_stack() as root:
        result = await run(root, "read", ws.call(), file_path="locked")
    assert (result.content, result.code) == (
        f'Error: cannot read "{ws.root}/locked": Permission denied',
        "FS_IO",
    )


async def test_walks_skip_symlinks_git_and_unreadable_directories(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "real.txt").write_text("needle\n")
    (ws.root / "link.txt").symlink_to(ws.root / "real.txt")
    (ws.root / "loop").symlink_to(ws.root, target_is_directory=True)
    (ws.root / ".git").mkdir()
    (ws.root / ".git" / "x.txt").write_text("needle\n")
    (ws.root / "closed").mkdir()
    (ws.root / "closed" / "y.txt").write_text("needle\n")
    real_scandir = os.scandir

    def refuse(fd: Any) -> Any:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("closed"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_scandir(fd)

    monkeypatch.setattr(os, "scandir", refuse)
    async with fs_stack() as root:
        listed = await run(root, "glob", ws.call(), pattern="**/*.txt")
        found = await run(root, "grep", ws.call(), pattern="needle")
    assert listed.content == f"{ws.root}/real.txt"
    assert found.content == f"Found 1 match\n{ws.root}/real.txt:1: needle"


async def test_search_skips_binary_empty_and_unreadable_files(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "bin.dat").write_bytes(b"needle\0")
    (ws.root / "empty.txt").write_text("")
    (ws.root / "gone.txt").write_text("needle\n")
    (ws.root / "ok.txt").write_bytes(b"needle \xff\r\n")
    (ws.root / "tail.txt").write_text("needle")
    (ws.root / "broken.txt").write_text("needle\n")
    real_open, real_read = os.open, os.read

    def vanished(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith("gone.txt"):
            raise FileNotFoundError(path)
        return real_open(path, flags, *args, **kwargs)

    def failing(fd: int, size: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("broken.txt"):
            raise OSError(errno.EIO, "Input/output error")
        return real_read(fd, size)

    monkeypatch.setattr(os, "open", vanished)
    monkeypatch.setattr(os, "read", failing)
    async with fs_stack() as root:
        found = await run(root, "grep", ws.call(), pattern="^$|needle")
    assert found.content == (
        f"Found 2 matches\n{ws.root}/ok.txt:1: needle \ufffd\n{ws.root}/tail.txt:1: needle"
    )


@pytest.mark.parametrize(
    "pattern", [r"bar$", r"^bar", r"\Abar", r"(?<=o)bar", r"(?-i:BAR)", r"o\nb"]
)
async def test_line_anchors_mean_the_line_with_or_without_the_quick_filter(
    ws: Layout, pattern: str
) -> None:
    (ws.root / "f.txt").write_bytes(b"foo\r\nbar\r\nfoobar BAR\r\n")
    expected = {
        r"bar$": [2, 3],
        r"^bar": [2],
        r"\Abar": [2],
        r"(?<=o)bar": [3],
        r"(?-i:BAR)": [3],
        r"o\nb": [],
    }[pattern]
    async with fs_stack() as root:
        found = await run(root, "grep", ws.call(), pattern=pattern, case_insensitive=True)
    numbers = [int(line.split(":")[1]) for line in found.content.split("\n")[1:]]
    assert numbers == expected


async def test_nested_gitignore_rules_override_and_directories_prune(ws: Layout) -> None:
    (ws.root / ".gitignore").write_text("*.gen\nvendor/\n")
    (ws.root / "pkg").mkdir()
    (ws.root / "pkg" / ".gitignore").write_text("!keep.gen\n")
    (ws.root / "pkg" / "keep.gen").write_text("hit\n")
    (ws.root / "pkg" / "drop.gen").write_text("hit\n")
    (ws.root / "vendor").mkdir()
    (ws.root / "vendor" / "lib.txt").write_text("hit\n")
    async with fs_stack() as root:
        found = await run(root, "grep", ws.call(), pattern="hit")
    assert found.content == f"Found 1 match\n{ws.root}/pkg/keep.gen:1: hit"


async def test_a_match_that_needs_the_next_line_matches_no_line(ws: Layout) -> None:
    (ws.root / "f.txt").write_text("foo\nbar\n")
    async with fs_stack() as root:
        found = await run(root, "grep", ws.call(), pattern=r"o(?=\n)")
    assert found.content == "No matches found"


async def test_the_limit_holds_line_by_line_too(ws: Layout) -> None:
    (ws.root / "f.txt").write_text("x1\nx2\nx3")
    async with fs_stack(tools=False) as root:
        result = await root.fs.search(r"\Ax", str(ws.root), limit=2)
    assert (result.total, [m.text for m in result.matches]) == (3, ["x1", "x2"])


async def test_search_reads_large_files_whole(ws: Layout) -> None:
    filler = "x" * 99 + "\n"
    (ws.root / "big.txt").write_text(filler * 2000 + "needle\n")  # past two 64 KiB reads
    async with fs_stack() as root:
        found = await run(root, "grep", ws.call(), pattern="needle")
        read = await run(root, "read", ws.call(), file_path="big.txt", offset=2001)
    assert found.content == f"Found 1 match\n{ws.root}/big.txt:2001: needle"
    assert read.content.endswith("2001: needle\n\n(End of file - total 2001 lines)\n</content>")


@pytest.mark.parametrize(
    ("pattern", "flags", "literal"),
    [
        ("needle_[0-9]+", 0, b"needle_"),
        ("colou?r", 0, b"colo"),
        ("ab*c", 0, b"a"),
        ("caf\u00e9", 0, "caf\u00e9".encode()),
        ("a|b", 0, b""),
        ("^abc", 0, b""),
        ("abc", re.IGNORECASE, b""),
    ],
)
def test_the_literal_every_match_contains(pattern: str, flags: int, literal: bytes) -> None:
    assert required_literal(re.compile(pattern, flags)) == literal


async def test_a_gitignore_that_is_a_symlink_a_fifo_or_unreadable_is_not_read(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.outside / "rules").write_text("*.txt\n")
    for name in ("linked", "piped", "broken"):
        (ws.root / name).mkdir()
        (ws.root / name / "f.txt").write_text("hit\n")
    (ws.root / "linked" / ".gitignore").symlink_to(ws.outside / "rules")
    os.mkfifo(ws.root / "piped" / ".gitignore")  # opening it for reading would block
    (ws.root / "broken" / ".gitignore").write_text("*.txt\n")
    real_read = os.read

    def failing(fd: int, size: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("broken/.gitignore"):
            raise OSError(errno.EIO, "Input/output error")
        return real_read(fd, size)

    monkeypatch.setattr(os, "read", failing)
    async with fs_stack() as root:
        found = await run(root, "grep", ws.call(), pattern="hit")
    assert found.content == "Found 3 matches\n" + "\n".join(
        f"{ws.root}/{name}/f.txt:1: hit" for name in ("broken", "linked", "piped")
    )


async def test_a_directory_that_cannot_be_opened_is_skipped(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("open", "sealed"):
        (ws.root / name).mkdir()
        (ws.root / name / "f.txt").write_text("hit\n")
    real_open = os.open

    def refuse(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "sealed":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    async with fs_stack() as root:
        listed = await run(root, "glob", ws.call(), pattern="**")
        found = await run(root, "grep", ws.call(), pattern="hit")
    assert listed.content == f"{ws.root}/open/f.txt"
    assert found.content == f"Found 1 match\n{ws.root}/open/f.txt:1: hit"


async def test_walks_and_searches_of_what_cannot_be_opened_or_read_are_io_errors(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "loop").symlink_to("loop")
    (ws.root / "file.txt").write_text("x\n")
    (ws.root / "broken.txt").write_text("x\n")
    real_read = os.read

    def failing(fd: int, size: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("broken.txt"):
            raise OSError(errno.EIO, "Input/output error")
        return real_read(fd, size)

    monkeypatch.setattr(os, "read", failing)
    async with fs_stack() as root:
        listed = await run(root, "glob", ws.call(), pattern="*", path="loop")
        searched = await run(root, "grep", ws.call(), pattern="x", path="loop")
        under_a_file = await run(root, "glob", ws.call(), pattern="*", path="file.txt/sub")
        broken = await run(root, "grep", ws.call(), pattern="x", path="broken.txt")
    loop = "Too many levels of symbolic links"
    assert (listed.content, listed.code) == (
        f'Error: cannot list "{ws.root}/loop": {loop}',
        "FS_IO",
    )
    assert (searched.content, searched.code) == (
        f'Error: cannot search "{ws.root}/loop": {loop}',
        "FS_IO",
    )
    assert (under_a_file.content, under_a_file.code) == (
        f'Error: cannot list "{ws.root}/file.txt/sub": not a directory',
        "FS_NOT_DIRECTORY",
    )
    assert (broken.content, broken.code) == (
        f'Error: cannot search "{ws.root}/broken.txt": Input/output error',
        "FS_IO",
    )


def test_a_walk_stopped_midway_closes_every_directory_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    fence = Fence(FsLocalConfig())
    entered: list[None] = []

    class Cancelled(Exception):
        """What ``check_cancelled`` raises in a thread whose caller was cancelled."""

    def cancelled_on_the_third() -> None:
        entered.append(None)
        if len(entered) == 3:
            raise Cancelled

    monkeypatch.setattr(anyio.from_thread, "check_cancelled", cancelled_on_the_third)
    before = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(Cancelled):
        walk.list_files(str(tmp_path), lambda relative: True, fence)
    assert sorted(os.listdir("/proc/self/fd")) == before


async def test_an_empty_match_on_an_empty_first_line_is_that_line(ws: Layout) -> None:
    (ws.root / "f.txt").write_text("\nabc\n")
    async with fs_stack() as root:
        found = await run(root, "grep", ws.call(), pattern="^$")
    assert found.content == f"Found 1 match\n{ws.root}/f.txt:1: "
