"""``deny_read`` holds for what is opened: a symlink swapped in after the check, a hard
link to a denied file, and the names and lines of denied files in listings and
searches."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import dsh_fs_local._deny as deny_module
from dsh import Context
from dsh_approval import ApprovalRequest
from dsh_fs_local import FsLocalConfig, LocalBackend
from dsh_fs_local._deny import DeniedFiles, DenyRule
from dsh_fs_local._fence import Fence
from tests.plugins.fs.fs_support import Layout, envelope, fs_stack, run

pytestmark = pytest.mark.anyio


def keys_of(ws: Layout) -> Path:
    keys = ws.outside / "keys"
    keys.mkdir()
    (keys / "id").write_text("SECRET\n")
    return keys


def refused(path: Path | str, pattern: str) -> str:
    return f'Error: cannot read "{path}": it matches the deny_read pattern "{pattern}"'


def after_the_check(root: Context, swap: Callable[[], None]) -> None:
    """Run ``swap`` once, right after the seam's ``check_read`` passed."""
    backend = root.fs.backend
    assert isinstance(backend, LocalBackend)
    real = backend.check_read
    done: list[bool] = []

    def check_then_swap(target: str, call: object) -> None:
        real(target, call)
        if not done:
            done.append(True)
            swap()

    backend.check_read = check_then_swap  # type: ignore[method-assign]


async def test_a_file_swapped_for_a_symlink_after_the_check_is_not_followed(ws: Layout) -> None:
    keys = keys_of(ws)
    (ws.root / "notes.txt").write_text("harmless\n")

    def swap() -> None:
        (ws.root / "notes.txt").unlink()
        (ws.root / "notes.txt").symlink_to(keys / "id")

    async with fs_stack({"deny_read": [f"{keys}/**"]}) as root:
        after_the_check(root, swap)
        result = await run(root, "read", ws.call(), file_path="notes.txt")
    assert (result.content, result.code) == (refused(keys / "id", f"{keys}/**"), "FS_READ_DENIED")


async def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    ws: Layout,
) -> None:
    keys = keys_of(ws)
    (ws.root / "sub").mkdir()
    (ws.root / "sub" / "id").write_text("harmless\n")

    def swap() -> None:
        (ws.root / "sub").rename(ws.root / "old")
        (ws.root / "sub").symlink_to(keys, target_is_directory=True)

    async with fs_stack({"deny_read": [f"{keys}/**"]}) as root:
        after_the_check(root, swap)
        result = await run(root, "read", ws.call(), file_path="sub/id")
    assert (result.content, result.code) == (refused(keys / "id", f"{keys}/**"), "FS_READ_DENIED")


async def test_a_swap_to_a_harmless_file_reads_what_the_path_leads_to_now(ws: Layout) -> None:
    (ws.root / "notes.txt").write_text("before\n")
    (ws.root / "other.txt").write_text("after\n")

    def swap() -> None:
        (ws.root / "notes.txt").unlink()
        (ws.root / "notes.txt").symlink_to(ws.root / "other.txt")

    async with fs_stack() as root:
        after_the_check(root, swap)
        text = await root.fs.read_text("notes.txt", ws.call())
    assert text.text == "after\n"


async def test_a_hard_link_to_a_denied_file_is_denied_everywhere(ws: Layout) -> None:
    keys = keys_of(ws)
    os.link(keys / "id", ws.root / "copy.txt")
    (ws.root / "open.txt").write_text("SECRET? no\n")
    os.link(ws.root / "open.txt", ws.root / "twin.txt")  # two links, none denied
    async with fs_stack({"deny_read": [f"{keys}/**"]}) as root:
        read = await run(root, "read", ws.call(), file_path="copy.txt")
        searched_file = await run(root, "grep", ws.call(), pattern="S", path="copy.txt")
        searched = await run(root, "grep", ws.call(), pattern="SECRET")
        listed = await run(root, "glob", ws.call(), pattern="*.txt")
        twin = await run(root, "read", ws.call(), file_path="twin.txt")
    message = (
        f'Error: cannot read "{ws.root}/copy.txt": it is a hard link of "{keys}/id", which '
        f'matches the deny_read pattern "{keys}/**"'
    )
    assert (read.content, read.code) == (message, "FS_READ_DENIED")
    assert (searched_file.content, searched_file.code) == (message, "FS_READ_DENIED")
    assert searched.content == (
        f"Found 2 matches\n{ws.root}/open.txt:1: SECRET? no\n{ws.root}/twin.txt:1: SECRET? no"
    )
    assert sorted(listed.content.split("\n")) == [f"{ws.root}/open.txt", f"{ws.root}/twin.txt"]
    assert twin.content == envelope(
        ws.root / "twin.txt", "1: SECRET? no\n\n(End of file - total 1 lines)"
    )


async def test_listings_and_searches_name_no_denied_file(ws: Layout) -> None:
    keys = keys_of(ws)
    (keys / "sub").mkdir()
    (keys / "sub" / "deep.pem").write_text("SECRET\n")
    (keys / "public.txt").write_text("SECRET but public\n")
    config = {"deny_read": [f"{keys}/id", f"{keys}/**/*.pem"]}
    async with fs_stack(config) as root:
        listed = await run(root, "glob", ws.call(), pattern="**", path=str(keys))
        searched = await run(root, "grep", ws.call(), pattern="SECRET", path=str(ws.outside))
    assert listed.content == f"{keys}/public.txt"
    assert searched.content == f"Found 1 match\n{keys}/public.txt:1: SECRET but public"


async def test_a_rule_that_covers_too_much_refuses_hard_linked_files(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = keys_of(ws)
    for n in range(3):
        (keys / f"k{n}").write_text("x\n")
    (ws.root / "open.txt").write_text("fine\n")
    os.link(ws.root / "open.txt", ws.root / "twin.txt")
    monkeypatch.setattr(deny_module, "SCAN_LIMIT", 3)
    async with fs_stack({"deny_read": [f"{keys}/*"]}) as root:
        twin = await run(root, "read", ws.call(), file_path="twin.txt")
        single = await run(root, "glob", ws.call(), pattern="*")
    assert (twin.content, twin.code) == (
        f'Error: cannot read "{ws.root}/twin.txt": it has 2 hard links, and the deny_read '
        f'pattern "{keys}/*" covers over 3 files, too many to rule out that one of them is '
        "denied",
        "FS_READ_DENIED",
    )
    assert single.content == "No files found"


def test_a_scan_goes_only_as_deep_as_a_rule_can_match(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    for name in ("top.key", "a/mid.key", "a/b/low.key", "a/other.txt"):
        (tmp_path / name).write_text("k\n")
    os.symlink(tmp_path / "a" / "mid.key", tmp_path / "a" / "link.key")
    walked: list[str] = []
    real_scandir = os.scandir

    def watch(path: str) -> object:
        walked.append(path)
        return real_scandir(path)

    rule = DenyRule.of(f"{tmp_path}/*/*.key")
    assert rule.depth == 2
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "scandir", watch)
        files = DeniedFiles.scan([rule, DenyRule.of(f"{tmp_path}/missing/**")])
    assert sorted(path for path, _ in files.found.values()) == [f"{tmp_path}/a/mid.key"]
    assert sorted(walked) == [str(tmp_path), f"{tmp_path}/a", f"{tmp_path}/missing"]
    assert DenyRule.of(f"{tmp_path}/**/x").depth is None


def test_the_screen_of_a_directory_holds_only_the_rules_that_can_match_there(
    tmp_path: Path,
) -> None:
    config = FsLocalConfig(deny_read=[f"{tmp_path}/a/**", f"{tmp_path}/a/b/*.pem", "/elsewhere/*"])
    fence = Fence(config)
    assert fence.screen("/unrelated") is None
    one = fence.screen(f"{tmp_path}/a/c")
    several = fence.screen(str(tmp_path))
    assert one is not None
    assert several is not None
    assert [bool(one(f"{tmp_path}/a/c/x")), bool(one(f"{tmp_path}/b/x"))] == [True, False]
    assert [bool(several(f"{tmp_path}/a/b/k.pem")), bool(several(f"{tmp_path}/z"))] == [True, False]


async def test_a_write_never_shows_or_replaces_a_denied_file(ws: Layout) -> None:
    keys = keys_of(ws)
    asked: list[str] = []

    def record(request: ApprovalRequest) -> bool:
        asked.append(request.detail)
        return True

    config = {"mode": "full-access", "deny_read": [f"{keys}/**"]}
    async with fs_stack(config, policy=False, approval={"policy": "ask"}) as root:
        root.approval.set_responder(record)
        result = await run(root, "write", ws.call(), file_path=str(keys / "id"), content="x")
    assert (result.content, result.code) == (refused(keys / "id", f"{keys}/**"), "FS_READ_DENIED")
    assert asked == []
    assert (keys / "id").read_text() == "SECRET\n"
