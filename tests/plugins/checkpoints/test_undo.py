"""Undo: byte-exact restores, conflicts, undo of an undo, and the events recorded."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dsh.testing import run_turn, text
from dsh_checkpoints import CheckpointConflictError, CheckpointError
from tests.plugins.checkpoints.ckpt_support import (
    blobs,
    edit_turn,
    file_events,
    runtime,
    write_turn,
)

pytestmark = pytest.mark.anyio

BINARY = bytes(range(256)) * 3 + b"\0\xff\xfe"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_undo_restores_binary_crlf_and_removes_created_files_and_dirs(
    tmp_path: Path,
) -> None:
    (tmp_path / "image.bin").write_bytes(BINARY)
    (tmp_path / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    replies = [
        *write_turn("image.bin", "now text"),
    ]
    turn = [
        replies[0],
        *edit_turn("win.txt", "two", "deux")[:2],
        write_turn("new/deep/made.txt", "fresh\n")[0],
        text("done"),
    ]
    async with runtime(tmp_path, *turn) as root:
        agent = root.agents.get("main")
        assert await run_turn(agent, "change things") == {"kind": "completed"}
        assert (tmp_path / "win.txt").read_bytes() == b"one\r\ndeux\r\n"
        events = file_events(agent.session)
        assert events == [
            {
                "turn": 1,
                "path": str(tmp_path / "image.bin"),
                "before": sha(BINARY),
                "after": sha(b"now text"),
            },
            {
                "turn": 1,
                "path": str(tmp_path / "win.txt"),
                "before": sha(b"one\r\ntwo\r\n"),
                "after": sha(b"one\r\ndeux\r\n"),
            },
            {
                "turn": 1,
                "path": str(tmp_path / "new/deep/made.txt"),
                "before": None,
                "after": sha(b"fresh\n"),
                "dirs": [str(tmp_path / "new"), str(tmp_path / "new/deep")],
            },
        ]
        assert {sha(BINARY), sha(b"one\r\ntwo\r\n")} <= blobs(tmp_path)
        done = await root.checkpoints.undo(agent)
        assert (done.turn, done.reverts, done.restore) == (1, None, 1)
        assert (tmp_path / "image.bin").read_bytes() == BINARY
        assert (tmp_path / "win.txt").read_bytes() == b"one\r\ntwo\r\n"
        assert not (tmp_path / "new").exists()
        restore = [e.data for e in agent.session.events if e.type == "checkpoint/restore"]
        assert restore == [
            {
                "turn": 1,
                "paths": [e["path"] for e in events],
                "restore": 1,
                "reverts": None,
                "forced": [],
            }
        ]


async def test_an_undo_is_undone_by_the_next_and_brings_a_deleted_file_back(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_bytes(b"old\n")
    async with runtime(tmp_path, *write_turn("a.txt", "new\n")) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "go")
        await root.checkpoints.undo(agent)
        assert (tmp_path / "a.txt").read_bytes() == b"old\n"
        again = await root.checkpoints.undo(agent)
        assert (again.reverts, again.restore, again.turn) == (1, 2, 1)
        assert (tmp_path / "a.txt").read_bytes() == b"new\n"
        third = await root.checkpoints.undo(agent)
        assert (third.reverts, (tmp_path / "a.txt").read_bytes()) == (2, b"old\n")


async def test_a_created_file_comes_back_after_its_removal_is_undone(tmp_path: Path) -> None:
    async with runtime(tmp_path, *write_turn("d/f.txt", "made\n")) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "go")
        await root.checkpoints.undo(agent)
        assert not (tmp_path / "d").exists()
        await root.checkpoints.undo(agent)
        assert (tmp_path / "d" / "f.txt").read_bytes() == b"made\n"
        await root.checkpoints.undo(agent)
        assert not (tmp_path / "d").exists()


async def test_a_file_changed_since_is_listed_and_nothing_restored_unless_forced(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("a0")
    (tmp_path / "b.txt").write_text("b0")
    turn = [
        write_turn("a.txt", "a1")[0],
        write_turn("b.txt", "b1")[0],
        text("ok"),
    ]
    async with runtime(tmp_path, *turn) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "go")
        (tmp_path / "b.txt").write_text("someone else")
        with pytest.raises(CheckpointConflictError) as caught:
            await root.checkpoints.undo(agent)
        assert caught.value.paths == (str(tmp_path / "b.txt"),)
        assert caught.value.code == "CHECKPOINT_CONFLICT"
        assert str(tmp_path / "b.txt") in str(caught.value)
        assert (tmp_path / "a.txt").read_text() == "a1"  # nothing restored
        assert not [e for e in agent.session.events if e.type == "checkpoint/restore"]
        forced = await root.checkpoints.undo(agent, force=True)
        assert forced.overwritten == (str(tmp_path / "b.txt"),)
        assert ((tmp_path / "a.txt").read_text(), (tmp_path / "b.txt").read_text()) == ("a0", "b0")
        # The bytes the forced undo replaced were checkpointed: undoing it brings them back.
        await root.checkpoints.undo(agent)
        assert (tmp_path / "b.txt").read_text() == "someone else"


async def test_a_file_deleted_since_or_replaced_by_a_directory_is_a_conflict(
    tmp_path: Path,
) -> None:
    (tmp_path / "gone.txt").write_text("g0")
    turn = [write_turn("gone.txt", "g1")[0], write_turn("dir.txt", "d1")[0], text("ok")]
    async with runtime(tmp_path, *turn) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "go")
        (tmp_path / "gone.txt").unlink()
        (tmp_path / "dir.txt").unlink()
        (tmp_path / "dir.txt").mkdir()
        with pytest.raises(CheckpointConflictError) as caught:
            await root.checkpoints.undo(agent)
        assert set(caught.value.paths) == {str(tmp_path / "gone.txt"), str(tmp_path / "dir.txt")}
        done = await root.checkpoints.undo(agent, force=True)
        assert (tmp_path / "gone.txt").read_text() == "g0"
        assert done.left == (str(tmp_path / "dir.txt"),)
        assert (tmp_path / "dir.txt").is_dir()


async def test_undo_skips_turns_without_changes_and_files_already_back(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a0")
    replies = [*write_turn("a.txt", "a1"), text("just talk")]
    async with runtime(tmp_path, *replies) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "write")
        await run_turn(agent, "talk")
        (tmp_path / "a.txt").write_text("a0")  # put back by hand
        done = await root.checkpoints.undo(agent)
        assert (done.turn, done.restored) == (1, ())


async def test_nothing_to_undo_is_an_error(tmp_path: Path) -> None:
    async with runtime(tmp_path, text("hi")) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "hello")
        with pytest.raises(CheckpointError, match='nothing to undo in session "'):
            await root.checkpoints.undo(agent)
        with pytest.raises(CheckpointError, match="is neither an agent nor a session"):
            await root.checkpoints.undo(object())
