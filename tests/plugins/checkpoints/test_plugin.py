"""The plugin's wiring: subagents' edits in the parent's turn, snapshots before bash
calls, the bounded store, the slash commands, disposal and config errors."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dsh import ConfigError, Context
from dsh.testing import capture_logs, run_turn
from dsh_bash import Bash, BashRequest
from dsh_bash_local import LocalBash
from dsh_checkpoints import SNAPSHOT_REF, CheckpointBlobError, Checkpoints
from dsh_tools import ToolCall
from tests.plugins.checkpoints.ckpt_support import blobs, file_events, runtime, write_turn

pytestmark = pytest.mark.anyio


async def test_a_subagents_edit_is_recorded_in_the_parents_turn(tmp_path: Path) -> None:
    async with runtime(tmp_path) as root:
        parent = root.agents.get("main")
        parent.session.append("turn/start", {"turn": 1})
        child = root.sessions.create(cwd=str(tmp_path), meta={"parent_session": parent.session.id})
        grandchild = root.sessions.create(cwd=str(tmp_path), meta={"parent_session": child.id})
        call = ToolCall("c", agent=SimpleNamespace(session=grandchild, cwd=str(tmp_path)))
        await root.fs.write_text("made.txt", "x", call)
        assert file_events(grandchild) == file_events(child) == []
        (recorded,) = file_events(parent.session)
        assert (recorded["turn"], recorded["by"]) == (1, grandchild.id)


async def test_mutations_without_an_agent_session_are_not_recorded(tmp_path: Path) -> None:
    async with runtime(tmp_path) as root:
        await root.fs.write_text(str(tmp_path / "free.txt"), "x", ToolCall("c"))
        await root.fs.write_text(str(tmp_path / "none.txt"), "x")
    assert blobs(tmp_path) == set()


def git(store: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={store / 'shadow.git'}", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


async def test_snapshot_bash_commits_the_tree_outside_it_honouring_gitignore(
    tmp_path: Path,
) -> None:
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "src.py").write_text("print(1)\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.o").write_text("junk")
    plugins = ((Bash, None), (LocalBash, None))
    async with runtime(tmp_path, plugins=plugins, config={"snapshot_bash": True}) as root:
        session = root.agents.get("main").session
        session.append("turn/start", {"turn": 1})
        request = BashRequest("true", cwd=str(tmp_path), session_id=session.id)
        await root.bash.run(request)
        (tmp_path / "src.py").write_text("print(2)\n")
        await root.bash.run(request)
        await root.bash.run(request)  # nothing changed: the same commit
        await root.bash.run(BashRequest("true"))  # no session: no snapshot
        trees = [e.data for e in session.events if e.type == "checkpoint/tree"]
    store = tmp_path / ".dsh" / "checkpoints"
    assert [t["turn"] for t in trees] == [1, 1, 1]
    first, second, third = (t["commit"] for t in trees)
    assert second != first
    assert third == second
    assert git(store, "rev-parse", SNAPSHOT_REF).strip() == second
    assert git(store, "ls-tree", "-r", "--name-only", first).split() == [".gitignore", "src.py"]
    assert git(store, "show", f"{first}:src.py") == "print(1)\n"
    assert not (tmp_path / ".git").exists()
    async with runtime(tmp_path, plugins=plugins, config={"snapshot_bash": True}) as root:
        session = root.agents.get("main").session
        await root.bash.run(BashRequest("true", session_id=session.id))
        (after_restart,) = [e.data for e in session.events if e.type == "checkpoint/tree"]
    assert after_restart["commit"] == second  # the repository's latest, found again


async def test_snapshot_failures_stop_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_checkpoints import CheckpointSnapshotError

    plugins = ((Bash, None), (LocalBash, None))
    async with runtime(tmp_path, plugins=plugins, config={"snapshot_bash": True}) as root:
        session = root.agents.get("main").session
        monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
        with pytest.raises(CheckpointSnapshotError, match="git cannot run"):
            await root.bash.run(BashRequest("true", session_id=session.id))
        monkeypatch.undo()
        (tmp_path / ".dsh" / "checkpoints").mkdir(parents=True, exist_ok=True)
        (tmp_path / ".dsh" / "checkpoints" / "shadow.git").write_text("not a repository")
        with pytest.raises(CheckpointSnapshotError, match="git init failed"):
            await root.bash.run(BashRequest("true", session_id=session.id))


async def test_the_store_is_bounded_keeping_what_recent_turns_reference(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.txt").write_bytes(name.encode() * 400)
    replies = [*write_turn("a.txt", "A"), *write_turn("b.txt", "B"), *write_turn("c.txt", "C")]
    config = {"max_bytes": 1000, "keep_turns": 1}
    async with runtime(tmp_path, *replies, config=config) as root:
        agent = root.agents.get("main")
        with capture_logs("dsh.checkpoints") as logs:
            for message in ("a", "b", "c"):
                await run_turn(agent, message)
        warnings = logs.messages(logging.WARNING)
        assert warnings
        assert "is over max_bytes (1000)" in warnings[0]
        events = file_events(agent.session)
        assert blobs(tmp_path) == {events[1]["before"], events[2]["before"]}
        # The oldest turn's checkpoint went: it can no longer be restored.
        await root.checkpoints.rewind(agent.session, 3)
        with pytest.raises(CheckpointBlobError, match="is no longer in"):
            await root.checkpoints.rewind(agent.session, 1)
        collected = root.checkpoints.gc(str(tmp_path))
        folder = tmp_path / ".dsh" / "checkpoints" / "blobs"
        on_disk = sum(p.stat().st_size for p in folder.iterdir())
        assert (collected.removed, collected.freed, collected.kept) == ((), 0, on_disk)


async def test_a_damaged_blob_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old")
    async with runtime(tmp_path, *write_turn("a.txt", "new")) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "go")
        (digest,) = blobs(tmp_path)
        (tmp_path / ".dsh" / "checkpoints" / "blobs" / digest).write_text("tampered")
        with pytest.raises(CheckpointBlobError, match="is damaged"):
            await root.checkpoints.undo(agent)
    assert (tmp_path / "a.txt").read_text() == "new"


async def test_a_configured_store_and_large_files(tmp_path: Path) -> None:
    big = b"x" * (200 * 1024)
    (tmp_path / "big.txt").write_bytes(big)
    async with runtime(
        tmp_path, *write_turn("big.txt", "small"), config={"store": "../st"}
    ) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "go")
        assert root.checkpoints.store_dir(str(tmp_path)) == (tmp_path / ".." / "st").absolute()
        await root.checkpoints.undo(agent)
    assert (tmp_path / "big.txt").read_bytes() == big
    assert len(list((tmp_path.parent / "st" / "blobs").iterdir())) == 2


async def slash(root: Context, agent: Any, line: str, switched: list[Any]) -> list[str]:
    replies: list[str] = []

    async def send(message: str) -> None:
        raise AssertionError("no command sends a message")

    handled = await root.slash_commands.dispatch(
        line,
        agent=agent,
        reply=replies.append,
        send=send,
        frontend="terminal",
        switch=switched.append,
    )
    assert handled
    return replies


async def test_undo_and_rewind_slash_commands(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a0")
    replies = [*write_turn("a.txt", "a1"), *write_turn("a.txt", "a2")]
    async with runtime(tmp_path, *replies) as root:
        agent = root.agents.get("main")
        assert await slash(root, agent, "/rewind", []) == ["no turns yet"]
        await run_turn(agent, "one")
        await run_turn(agent, "two")
        (tmp_path / "a.txt").write_text("by hand")
        switched: list[Any] = []
        (conflict,) = await slash(root, agent, "/undo", switched)
        assert "(/undo --force overwrites)" in conflict
        (forced,) = await slash(root, agent, "/undo --force", switched)
        assert forced.startswith(f"restored turn 2's changes: {tmp_path / 'a.txt'}")
        assert "overwritten although changed since" in forced
        (redo,) = await slash(root, agent, "/undo", switched)
        assert redo.startswith("restored the undo of turn 2 (restore 1)")
        assert await slash(root, agent, "/undo now", switched) == [
            "/undo takes no arguments but --force (got 'now')"
        ]
        assert await slash(root, agent, "/rewind", switched) == [
            "1: one  [1 file(s)]\n2: two  [1 file(s)]"
        ]
        (bad,) = await slash(root, agent, "/rewind soon", switched)
        assert "/rewind takes a turn number (got 'soon')" in bad
        (done,) = await slash(root, agent, "/rewind 2 --force", switched)
        assert (tmp_path / "a.txt").read_text() == "a1"
        assert switched == [root.agents.get("main")]
        assert f"continuing in session {switched[0].session.id}" in done


async def test_disposal_leaves_no_registration_behind(tmp_path: Path) -> None:
    async with runtime(tmp_path, plugins=((Bash, None),)) as root:
        pass
    async with Context() as root:
        from dsh_agent_core import AgentCore
        from dsh_fs import Filesystem

        await root.plugin(AgentCore, {"model": "scripted"})
        await root.plugin(Filesystem)
        await root.plugin(Bash)
        types = root.sessions.event_types()
        commands = [c.name for c in root.slash_commands.list()]
        fiber = await root.plugin(Checkpoints, {"snapshot_bash": True})
        assert {"checkpoint/file", "checkpoint/tree", "checkpoint/restore"} <= (
            root.sessions.durable_types()
        )
        assert {"undo", "rewind"} <= {c.name for c in root.slash_commands.list()}
        await fiber.dispose()
        assert root.sessions.event_types() == types
        assert [c.name for c in root.slash_commands.list()] == commands
        assert root.fs._hooks == []
        assert root.bash._before == []


@pytest.mark.parametrize(
    ("config", "key"),
    [({"max_bytes": 0}, "max_bytes"), ({"keep_turns": 0}, "keep_turns"), ({"snap": 1}, "snap")],
)
async def test_config_errors_name_the_key(tmp_path: Path, config: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        async with runtime(tmp_path, config=config):
            pass
