"""The blob store and the event reading on their own: atomic writes, collection order,
and what undo picks while a turn is still open."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dsh import Context
from dsh.testing import run_turn
from dsh_bash import Bash, BashRequest
from dsh_bash_local import LocalBash
from dsh_checkpoints import BlobStore, CheckpointError, Checkpoints, write_atomic
from dsh_checkpoints._history import last_unit, turns
from dsh_fs import Filesystem
from dsh_session import Sessions
from tests.plugins.checkpoints.ckpt_support import runtime, write_turn

pytestmark = pytest.mark.anyio


def test_a_failed_write_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(tmp_path / "x" / "blob", b"data")
    assert list((tmp_path / "x").iterdir()) == []


def test_collection_drops_the_oldest_unkept_blobs_first(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    digests = [store.put(bytes([n]) * 100) for n in range(4)]
    for age, digest in enumerate(digests):
        os.utime(store.path(digest), (1000 + age, 1000 + age))
    (store.blobs / ".partial.dsh-tmp").write_bytes(b"ignored")
    assert store.size() == 400
    done = store.collect(250, keep={digests[0]})
    assert (done.removed, done.freed, done.kept) == ((digests[1], digests[2]), 200, 200)
    everything = store.collect(0, keep=set(digests))
    assert (everything.removed, everything.kept) == ((), 200)
    assert store.put(bytes([3]) * 100) == digests[3]  # already there: not counted twice
    assert store.size() == 200


def event(seq: int, kind: str, **data: Any) -> Any:
    return SimpleNamespace(seq=seq, type=kind, data=data)


def test_undo_leaves_an_open_turn_and_turns_skip_other_events() -> None:
    events = [
        event(0, "turn/start", turn=1),
        event(1, "checkpoint/file", turn=1, path="/a", before=None, after="x"),
        event(2, "turn/end", turn=1, reason={"kind": "completed"}),
        event(3, "turn/start", turn=2),
        event(4, "checkpoint/tree", turn=2, commit="c"),
        event(5, "checkpoint/file", turn=2, path="/b", before=None, after="y"),
        event(6, "checkpoint/file", turn=2, path="/b", before="y", after="z"),
    ]
    unit = last_unit(events)
    assert unit is not None
    assert (unit.turn, [e.seq for e in unit.events]) == (1, [1])
    assert [(t.turn, t.files) for t in turns(events)] == [(1, ("/a",)), (2, ("/b",))]


async def test_snapshot_bash_without_bash_and_a_store_outside_the_root(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "f.txt").write_text("f")
    async with runtime(workspace, config={"snapshot_bash": True}) as root:
        assert root.get("bash") is None  # nothing to hook: it starts anyway
    async with Context() as root:
        await root.plugin(Sessions)
        await root.plugin(Filesystem)
        await root.plugin(Checkpoints)  # no slash-command registry: no commands
    config = {"snapshot_bash": True, "store": str(tmp_path / "elsewhere")}
    plugins = ((Bash, None), (LocalBash, None))
    async with runtime(workspace, plugins=plugins, config=config) as root:
        session = root.agents.get("main").session
        await root.bash.run(BashRequest("true", session_id=session.id))
        assert [e.type for e in session.events] == ["checkpoint/tree"]
    assert (tmp_path / "elsewhere" / "shadow.git" / "HEAD").exists()
    assert not (workspace / ".dsh").exists()


async def test_rewind_over_acp_reports_the_new_session_without_switching(
    tmp_path: Path,
) -> None:
    async with runtime(tmp_path, *write_turn("a.txt", "one")) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "go")
        (tmp_path / "a.txt").unlink()
        (tmp_path / "a.txt").mkdir()
        replies: list[str] = []

        async def send(text: str) -> None:
            raise AssertionError(text)

        await root.slash_commands.dispatch(
            "/rewind 1 --force", agent=agent, reply=replies.append, send=send, frontend="acp"
        )
        (reply,) = replies
        assert f"left alone (not a regular file now): {tmp_path / 'a.txt'}" in reply
        assert "continuing in session" in reply
        with pytest.raises(CheckpointError):
            await root.checkpoints.undo(root.agents.get("main"))
