"""The fence of ``fs-local``: escapes are refused and nothing lands outside (checked on
disk), read-only, full access, reads outside, ``deny_read``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import dsh_fs_local._atomic as atomic
from dsh_approval import ApprovalRequest
from tests.plugins.fs.fs_support import Layout, envelope, fs_stack, run

pytestmark = pytest.mark.anyio


def denied(ws: Layout, target: Path | str) -> str:
    return (
        f'Error: cannot change "{target}": it is outside the workspace "{ws.root}" (fs-local '
        "mode workspace-write allows the workspace and the temp dir)"
    )


async def test_dot_dot_absolute_and_hidden_escapes_are_refused(ws: Layout) -> None:
    (ws.root / "a").mkdir()
    escapes = ["../outside/x.txt", str(ws.outside / "x.txt"), "./a/../../outside/x.txt"]
    async with fs_stack() as root:
        results = [await run(root, "write", ws.call(), file_path=p, content="x") for p in escapes]
        edit = await run(
            root, "edit", ws.call(), file_path="../outside/x.txt", old_string="a", new_string="b"
        )
    for result in [*results, edit]:
        assert (result.content, result.code) == (
            denied(ws, ws.outside / "x.txt"),
            "FS_SANDBOX_DENIED",
        )
    assert ws.files_outside() == []


async def test_a_symlink_to_outside_is_refused_for_files_and_directories(ws: Layout) -> None:
    secret = ws.outside / "secret.txt"
    secret.write_text("keep\n")
    (ws.root / "link.txt").symlink_to(secret)
    (ws.root / "door").symlink_to(ws.outside, target_is_directory=True)
    async with fs_stack() as root:
        through_file = await run(root, "write", ws.call(), file_path="link.txt", content="x")
        through_dir = await run(root, "write", ws.call(), file_path="door/new.txt", content="x")
    assert through_file.content == denied(ws, secret)
    assert through_dir.content == denied(ws, ws.outside / "new.txt")
    assert ws.files_outside() == [secret]
    assert secret.read_text() == "keep\n"


async def test_a_symlink_swapped_in_after_the_check_is_refused(ws: Layout) -> None:
    (ws.root / "sub").mkdir()

    def swap_then_approve(request: ApprovalRequest) -> bool:
        # Runs after the sandbox check and before the write: the directory becomes a
        # symlink to outside.
        (ws.root / "sub").rmdir()
        (ws.root / "sub").symlink_to(ws.outside, target_is_directory=True)
        return True

    async with fs_stack(approval={"policy": "ask"}) as root:
        root.approval.set_responder(swap_then_approve)
        result = await run(root, "write", ws.call(), file_path="sub/f.txt", content="x")
    assert (result.content, result.code) == (denied(ws, ws.outside / "f.txt"), "FS_SANDBOX_DENIED")
    assert ws.files_outside() == []


async def test_a_swap_inside_the_workspace_while_asking_is_a_stale_write(ws: Layout) -> None:
    (ws.root / "sub").mkdir()
    (ws.root / "elsewhere").mkdir()

    def swap_then_approve(request: ApprovalRequest) -> bool:
        (ws.root / "sub").rmdir()
        (ws.root / "sub").symlink_to(ws.root / "elsewhere", target_is_directory=True)
        return True

    async with fs_stack(approval={"policy": "ask"}) as root:
        root.approval.set_responder(swap_then_approve)
        result = await run(root, "write", ws.call(), file_path="sub/f.txt", content="x")
    assert (result.content, result.code) == (
        f'Error: "{ws.root}/sub/f.txt" changed since it was read — re-read the file, then retry',
        "FS_STALE_VERSION",
    )
    assert list((ws.root / "elsewhere").iterdir()) == []


async def test_a_swap_just_before_the_rename_is_caught_by_recanonicalising(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "sub").mkdir()
    real_write_temp = atomic.write_temp

    def write_then_swap(directory: int, name: str, data: bytes) -> str:
        temp = real_write_temp(directory, name, data)
        # The temp file is written; now, before the rename, the path is redirected.
        os.rename(ws.root / "sub", ws.root / "moved")
        (ws.root / "sub").symlink_to(ws.outside, target_is_directory=True)
        return temp

    monkeypatch.setattr(atomic, "write_temp", write_then_swap)
    async with fs_stack() as root:
        result = await run(root, "write", ws.call(), file_path="sub/f.txt", content="x")
    assert (result.content, result.code) == (denied(ws, ws.outside / "f.txt"), "FS_SANDBOX_DENIED")
    assert ws.files_outside() == []
    assert list((ws.root / "moved").iterdir()) == []  # the temp file is gone too


async def test_a_swap_at_the_rename_itself_still_lands_in_the_checked_directory(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "sub").mkdir()
    real_rename = os.rename

    def swap_then_rename(src: str, dst: str, **kwargs: int) -> None:
        # After every check: the rename is relative to the directory opened and checked,
        # so it cannot follow the new symlink.
        if str(src).endswith(".dsh-tmp"):
            real_rename(ws.root / "sub", ws.root / "moved")
            (ws.root / "sub").symlink_to(ws.outside, target_is_directory=True)
        real_rename(src, dst, **kwargs)

    monkeypatch.setattr(os, "rename", swap_then_rename)
    async with fs_stack() as root:
        result = await run(root, "write", ws.call(), file_path="sub/f.txt", content="x")
    assert not result.is_error, result.content
    assert ws.files_outside() == []
    assert (ws.root / "moved" / "f.txt").read_text() == "x"


async def test_a_swap_inside_the_workspace_is_a_stale_write(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "sub").mkdir()
    (ws.root / "other").mkdir()
    real_write_temp = atomic.write_temp

    def write_then_swap(directory: int, name: str, data: bytes) -> str:
        temp = real_write_temp(directory, name, data)
        os.rename(ws.root / "sub", ws.root / "moved")
        (ws.root / "sub").symlink_to(ws.root / "other", target_is_directory=True)
        return temp

    monkeypatch.setattr(atomic, "write_temp", write_then_swap)
    async with fs_stack() as root:
        result = await run(root, "write", ws.call(), file_path="sub/f.txt", content="x")
    assert (result.content, result.code) == (
        f'Error: "{ws.root}/sub/f.txt" changed while it was being written (a directory or '
        "symlink in its path was swapped) — re-read the file, then retry",
        "FS_STALE_VERSION",
    )
    assert list((ws.root / "other").iterdir()) == list((ws.root / "moved").iterdir()) == []


async def test_a_directory_replaced_by_another_is_a_stale_write(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "sub").mkdir()
    real_write_temp = atomic.write_temp

    def write_then_replace(directory: int, name: str, data: bytes) -> str:
        temp = real_write_temp(directory, name, data)
        os.rename(ws.root / "sub", ws.outside / "sub")  # moved away, a new one in its place
        (ws.root / "sub").mkdir()
        return temp

    monkeypatch.setattr(atomic, "write_temp", write_then_replace)
    async with fs_stack() as root:
        result = await run(root, "write", ws.call(), file_path="sub/f.txt", content="x")
    assert result.code == "FS_STALE_VERSION"
    assert ws.files_outside() == [ws.outside / "sub"]


async def test_a_symlink_appearing_on_the_way_down_is_caught(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "sub").mkdir()
    real_open_directory = atomic.open_directory

    def swap_then_open(path: str) -> int:
        shutil.rmtree(ws.root / "sub")
        (ws.root / "sub").symlink_to(ws.outside, target_is_directory=True)
        return real_open_directory(path)

    monkeypatch.setattr(atomic, "open_directory", swap_then_open)
    async with fs_stack() as root:
        result = await run(root, "write", ws.call(), file_path="sub/deep/f.txt", content="x")
    assert result.content == denied(ws, ws.outside / "deep" / "f.txt")
    assert ws.files_outside() == []


async def test_the_workspace_and_the_temp_dir_are_writable(ws: Layout) -> None:
    (ws.root / "inside").symlink_to(ws.root / "real", target_is_directory=True)
    (ws.root / "real").mkdir()
    async with fs_stack() as root:
        temp = await run(root, "write", ws.call(), file_path=str(ws.temp / "t.txt"), content="t")
        via_link = await run(root, "write", ws.call(), file_path="inside/f.txt", content="f")
    assert temp.content == envelope(ws.temp / "t.txt", "Created file")
    assert via_link.content == envelope(ws.root / "real" / "f.txt", "Created file")


async def test_a_configured_root_replaces_the_session_cwd(ws: Layout) -> None:
    async with fs_stack({"root": str(ws.outside)}) as root:
        inside_root = await run(root, "write", ws.call(), file_path="../outside/ok.txt", content="")
        in_cwd = await run(root, "write", ws.call(), file_path="no.txt", content="")
    assert not inside_root.is_error
    assert in_cwd.content == (
        f'Error: cannot change "{ws.root}/no.txt": it is outside the workspace "{ws.outside}" '
        "(fs-local mode workspace-write allows the workspace and the temp dir)"
    )


async def test_without_a_session_the_root_is_the_process_cwd(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ws.root)
    async with fs_stack() as root:
        ok = await run(root, "write", None, file_path="here.txt", content="")
        refused = await run(root, "write", None, file_path=str(ws.outside / "x"), content="")
    assert ok.content == envelope(ws.root / "here.txt", "Created file")
    assert refused.code == "FS_SANDBOX_DENIED"
    assert ws.files_outside() == []


async def test_read_only_refuses_every_mutation_and_still_reads(ws: Layout) -> None:
    target = ws.root / "f.txt"
    target.write_text("a\n")
    async with fs_stack({"mode": "read-only"}) as root:
        call = ws.call()
        read = await run(root, "read", call, file_path="f.txt")
        write = await run(root, "write", call, file_path="f.txt", content="b\n")
        edit = await run(root, "edit", call, file_path="f.txt", old_string="a", new_string="b")
        temp = await run(root, "write", call, file_path=str(ws.temp / "t"), content="")
    assert not read.is_error
    for result, path in ((write, target), (edit, target), (temp, ws.temp / "t")):
        assert (result.content, result.code) == (
            f'Error: cannot change "{path}": the filesystem is read-only (fs-local mode read-only)',
            "FS_SANDBOX_DENIED",
        )
    assert target.read_text() == "a\n"
    assert list(ws.temp.iterdir()) == []


async def test_full_access_writes_anywhere(ws: Layout) -> None:
    async with fs_stack({"mode": "full-access"}) as root:
        result = await run(root, "write", ws.call(), file_path="../outside/x.txt", content="x")
    assert result.content == envelope(ws.outside / "x.txt", "Created file")


async def test_reads_are_not_fenced_but_deny_read_is(ws: Layout) -> None:
    (ws.outside / "open.txt").write_text("visible\n")
    keys = ws.outside / "keys"
    keys.mkdir()
    (keys / "id").write_text("secret\n")
    (ws.root / "alias").symlink_to(keys / "id")
    (ws.root / "notes.txt").write_text("secret\n")
    config = {"deny_read": [f"{keys}/**", "/nowhere/*.pem"]}
    async with fs_stack(config) as root:
        outside = await run(root, "read", ws.call(), file_path="../outside/open.txt")
        direct = await run(root, "read", ws.call(), file_path=str(keys / "id"))
        aliased = await run(root, "read", ws.call(), file_path="alias")
        searched = await run(root, "grep", ws.call(), pattern="secret", path="..")
        searched_file = await run(root, "grep", ws.call(), pattern="x", path=str(keys / "id"))
    assert outside.content == envelope(
        ws.outside / "open.txt", "1: visible\n\n(End of file - total 1 lines)"
    )
    message = f'Error: cannot read "{keys}/id": it matches the deny_read pattern "{keys}/**"'
    for result in (direct, aliased, searched_file):
        assert (result.content, result.code) == (message, "FS_READ_DENIED")
    assert searched.content == f"Found 1 match\n{ws.root}/notes.txt:1: secret"


async def test_the_default_deny_read_covers_keys_in_the_home_directory(
    tmp_path: Path, ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    for folder in (".ssh", ".aws", ".gnupg"):
        (home / folder).mkdir(parents=True)
        (home / folder / "key").write_text("k\n")
    monkeypatch.setenv("HOME", str(home))
    async with fs_stack() as root:
        results = [
            await run(root, "read", ws.call(), file_path=str(home / folder / "key"))
            for folder in (".ssh", ".aws", ".gnupg")
        ]
    assert [r.code for r in results] == ["FS_READ_DENIED"] * 3
    assert results[0].content.endswith('matches the deny_read pattern "~/.ssh/**"')
