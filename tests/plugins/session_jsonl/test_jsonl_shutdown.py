"""Shutting down mid-turn: every record the agent made reaches the file, and the turn
ends ``aborted``/``disposed`` — whatever order the deployment lists its plugins in."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh import Context, Disposer, FiberState
from dsh.testing import Mark, ScriptedModel, Wait, state, text, tool_call, tool_calls, until
from dsh_agent_core import AgentCore
from dsh_session import Session
from dsh_session_jsonl import JsonlSessions
from dsh_session_jsonl._format import FILE_NAME
from dsh_session_jsonl._log import _STALE_SECONDS, _stale, load_session, sweep_stale
from dsh_tools import Tool, ToolCall
from tests.plugins.tools.tools_support import NoArgs

pytestmark = pytest.mark.anyio

DISPOSED = {"kind": "aborted", "reason": "disposed"}


def blocking_tool(started: anyio.Event) -> Any:
    """A plugin with a tool ``block`` that never returns on its own."""

    def plugin(ctx: Context, config: None) -> Iterator[Disposer]:
        async def block(args: NoArgs, call: ToolCall) -> str:
            started.set()
            await anyio.Event().wait()
            return "never"

        yield ctx.tools.register(
            Tool(name="block", description="Blocks.", parameters=NoArgs, execute=block)
        )

    plugin.inject = ["tools"]  # type: ignore[attr-defined]
    return plugin


def on_disk(root: Path, session: Session) -> list[tuple[int, str, Any]]:
    loaded = load_session(root / session.id, session.id, fsync=False)
    assert loaded is not None
    return [(e.seq, e.type, dict(e.data)) for e in loaded.events]


def in_memory(session: Session) -> list[tuple[int, str, Any]]:
    return [(e.seq, e.type, dict(e.data)) for e in session.events]


@pytest.mark.parametrize("jsonl_first", [True, False])
async def test_disposing_the_root_mid_tool_call_keeps_every_record(
    tmp_path: Path, jsonl_first: bool
) -> None:
    started = anyio.Event()
    model = ScriptedModel(tool_calls(tool_call("block", id="c1")))
    async with Context() as root:
        parts: list[tuple[Any, Any]] = [
            (AgentCore, {"model": "scripted"}),
            (blocking_tool(started), None),
        ]
        jsonl = (JsonlSessions, {"root": str(tmp_path)})
        parts.insert(0, jsonl) if jsonl_first else parts.append(jsonl)
        for plugin, config in parts:
            root.plugin(plugin, config)
        await root.settle()
        model.install(root)
        agent = root.agents.get("main")
        agent.send("block")
        await started.wait()
        session = agent.session
    assert session.events[-1].data == {
        "turn": 1,
        "reason": {"kind": "aborted", "reason": "disposed"},
    }
    assert [e.type for e in session.events[-3:]] == ["tool/result", "step/end", "turn/end"]
    assert session.events[-3].data["code"] == "ABORTED"
    assert on_disk(tmp_path, session) == in_memory(session)


async def test_disposing_the_root_mid_stream_keeps_every_record(tmp_path: Path) -> None:
    streaming = anyio.Event()
    model = ScriptedModel([*text("partial ")[:2], Mark(streaming), Wait(anyio.Event())])
    async with Context() as root:
        root.plugin(AgentCore, {"model": "scripted"})
        root.plugin(JsonlSessions, {"root": str(tmp_path)})
        await root.settle()
        model.install(root)
        agent = root.agents.get("main")
        agent.send("hi")
        await streaming.wait()
        session = agent.session
        await until(lambda: session.events[-1].type == "assistant/chunk")
    assert session.events[-1].data == {
        "turn": 1,
        "reason": {"kind": "aborted", "reason": "disposed"},
    }
    kept = [e.data for e in session.events if e.type == "assistant/message"]
    assert kept[-1]["interrupted"] is True
    assert on_disk(tmp_path, session) == in_memory(session)


async def test_unloading_persistence_alone_lets_the_running_turn_finish(tmp_path: Path) -> None:
    # Only the persistence plugin goes: the agent lives on; its running turn is
    # recorded to the end before the file closes, and nothing after it.
    started = anyio.Event()
    release = anyio.Event()
    model = ScriptedModel([Mark(started), Wait(release), *text("done")])
    async with Context() as root:
        root.plugin(AgentCore, {"model": "scripted"})
        jsonl = root.plugin(JsonlSessions, {"root": str(tmp_path)})
        await root.settle()
        model.install(root)
        agent = root.agents.get("main")
        agent.send("hi")
        await started.wait()

        async def unload() -> None:
            await jsonl.dispose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(unload)
            await until(lambda: state(jsonl) is FiberState.UNLOADING)
            await anyio.lowlevel.checkpoint()
            assert state(jsonl) is FiberState.UNLOADING  # waiting for the turn to end
            release.set()
        assert state(jsonl) is FiberState.DISPOSED
        await agent.when_idle()
        session = agent.session
        assert on_disk(tmp_path, session) == in_memory(session)
        assert session.turn_end(1) == {"kind": "completed"}


# -- a crash while a session is being created ----------------------------------------------


def stale_temporary(directory: Path) -> Path:
    directory.mkdir(parents=True)
    tmp = directory / f".{FILE_NAME}.0123456789abcdef.tmp"
    tmp.write_text('{"id": "x"}')
    old = time.time() - _STALE_SECONDS - 1
    os.utime(tmp, (old, old))
    return tmp


async def test_a_crash_during_creation_leaves_no_phantom_session(tmp_path: Path) -> None:
    root_dir = tmp_path / "sessions"
    stale = stale_temporary(root_dir / "phantom")
    (root_dir / "empty").mkdir()
    fresh = root_dir / "busy" / f".{FILE_NAME}.fedcba9876543210.tmp"
    fresh.parent.mkdir()
    fresh.write_text("{}")  # young: its creator may still be writing it
    # Listing alone skips directories without a published file.
    async with Context() as root:
        root.plugin(AgentCore, {})
        plugin = root.plugin(JsonlSessions, {"root": str(root_dir)})
        await root.settle()
        assert root.sessions.stored() == []
        assert plugin.state.name == "ACTIVE"
    # Starting the plugin swept what the crash left: the temporary nobody holds, and
    # the directories left empty; the young temporary stays.
    assert not stale.exists()
    assert not (root_dir / "phantom").exists()
    assert not (root_dir / "empty").exists()
    assert fresh.exists()


def test_the_sweep_keeps_a_temporary_whose_creator_holds_it(tmp_path: Path) -> None:
    import fcntl

    tmp = stale_temporary(tmp_path / "s1")
    fd = os.open(tmp, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert sweep_stale(tmp_path, time.time()) == []
    finally:
        os.close(fd)
    assert sweep_stale(tmp_path, time.time()) == [tmp, tmp.parent]
    assert sweep_stale(tmp_path / "missing", time.time()) == []
    assert not _stale(tmp_path / "vanished.tmp", time.time())
