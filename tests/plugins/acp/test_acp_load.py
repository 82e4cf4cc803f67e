"""``session/load``: a stored session is resumed on a new agent and its history is
replayed as session updates before the answer."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError

from dsh.testing import Mark, Wait, capture_logs, tool_call, tool_calls
from dsh_session import Session, SessionEvent
from dsh_session_jsonl import FILE_NAME, JsonlSessions
from dsh_tool_todo import ToolTodo
from tests.plugins.acp.acp_support import acp_rig

pytestmark = pytest.mark.anyio


def stored(root: Path) -> tuple[tuple[Any, Any], ...]:
    return ((JsonlSessions, {"root": str(root), "fsync": False}), (ToolTodo, None))


async def test_a_loaded_session_replays_its_history_then_goes_on(tmp_path: Path) -> None:
    todos = [{"content": "look", "status": "in_progress"}]
    replies = (
        "Hi there",
        tool_calls(tool_call("echo", {"text": "ping"}, id="e1")),
        "pong",
        tool_calls(tool_call("todo_write", {"todos": todos}, id="t1")),
        "planned",
    )
    sessions = stored(tmp_path / "sessions")
    async with acp_rig(tmp_path, *replies, plugins=sessions) as first:
        session = await first.new()
        for said in ("hello", "echo ping", "plan"):
            assert await first.say(session, said) == "end_turn"
    async with acp_rig(tmp_path, "welcome back", plugins=sessions) as r:
        await r.agent.initialize(protocol_version=1)
        await r.agent.load_session(cwd=str(tmp_path), session_id=session)
        replayed = [(s, u.session_update) for s, u in r.client.updates]
        assert replayed == [
            (session, kind)
            for kind in (
                "user_message_chunk",
                "agent_message_chunk",
                "user_message_chunk",
                "tool_call",
                "tool_call_update",
                "agent_message_chunk",
                "user_message_chunk",
                "tool_call",
                "plan",
                "tool_call_update",
                "agent_message_chunk",
            )
        ]
        assert r.client.text("user_message_chunk") == "helloecho pingplan"
        assert r.client.text() == "Hi therepongplanned"
        echo = r.client.of_kind("tool_call")[0]
        assert (echo.tool_call_id, echo.status) == ("e1", "in_progress")
        agent = r.dsh_agent(session)
        assert agent.id == "acp-1"
        assert agent.cwd == str(tmp_path)
        r.client.updates.clear()
        assert await r.say(session, "again") == "end_turn"
        assert r.client.text() == "welcome back"
        assert [m.text for m in r.model.requests[0].messages if m.role == "user"] == [
            "hello",
            "echo ping",
            "plan",
            "again",
        ]


async def test_a_turn_the_process_died_in_is_closed_and_replayed(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    started, never = anyio.Event(), anyio.Event()
    async with acp_rig(tmp_path, [Mark(started), Wait(never)], plugins=stored(root)) as first:
        session = await first.new()
        async with anyio.create_task_group() as tg:
            tg.start_soon(first.say, session, "hang")
            await started.wait()
            # What a crash leaves: the log as written while the turn was open.
            log = root / session / FILE_NAME
            shutil.copy(log, tmp_path / "crashed.jsonl")
            tg.cancel_scope.cancel()
    shutil.copy(tmp_path / "crashed.jsonl", log)
    async with acp_rig(tmp_path, "recovered", plugins=stored(root)) as r:
        await r.agent.load_session(cwd=str(tmp_path), session_id=session)
        assert r.client.kinds() == ["user_message_chunk"]
        agent = r.dsh_agent(session)
        assert agent.session.turn_end(1) == {"kind": "interrupted"}
        assert await r.say(session, "still there?") == "end_turn"


async def test_a_failure_closing_the_open_turn_leaves_no_agent(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    started, never = anyio.Event(), anyio.Event()
    async with acp_rig(tmp_path, [Mark(started), Wait(never)], plugins=stored(root)) as first:
        session = await first.new()
        first.dsh_agent(session).send("hang")
        await started.wait()
        shutil.copy(root / session / FILE_NAME, tmp_path / "crashed.jsonl")
    shutil.copy(tmp_path / "crashed.jsonl", root / session / FILE_NAME)
    async with acp_rig(tmp_path, plugins=stored(root)) as r:

        def refuse(session: Session, event: SessionEvent) -> None:
            if event.type == "turn/end":
                raise RuntimeError("the disk is full")

        r.root.on("session/event", refuse)
        with pytest.raises(RuntimeError, match="the disk is full"):
            await r.agent.load_session(cwd=str(tmp_path), session_id=session)
        assert [a.id for a in r.root.agents.list()] == ["main"]
        assert r.root.sessions.get(session) is None
        assert r.client.updates == []


async def test_a_session_keeps_the_cwd_it_was_made_in(tmp_path: Path) -> None:
    sessions = stored(tmp_path / "sessions")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with acp_rig(tmp_path, "hi", plugins=sessions) as first:
        session = await first.new()
        await first.say(session, "hello")
    async with acp_rig(tmp_path, plugins=sessions) as r:
        with capture_logs("dsh.acp") as logs:
            await r.agent.load_session(cwd=str(elsewhere), session_id=session)
        assert r.dsh_agent(session).cwd == str(tmp_path)
    assert any(f"it stays there (the client asked for {elsewhere})" in m for m in logs.messages())


async def test_what_cannot_be_loaded_is_refused(tmp_path: Path) -> None:
    async with acp_rig(tmp_path) as r:
        with pytest.raises(RequestError, match="this deployment stores no sessions") as none:
            await r.agent.load_session(cwd=str(tmp_path), session_id="abc")
        assert none.value.code == -32600
    async with acp_rig(tmp_path, "hi", plugins=stored(tmp_path / "s")) as r:
        with pytest.raises(RequestError, match='no stored session "abc"') as unknown:
            await r.agent.load_session(cwd=str(tmp_path), session_id="abc")
        assert unknown.value.code == -32602
        assert unknown.value.data == {"code": "SESSION"}
        with pytest.raises(RequestError, match="cwd must be an absolute path"):
            await r.agent.load_session(cwd=".", session_id="abc")
        session = await r.new()
        with pytest.raises(RequestError, match="is already open on this connection"):
            await r.agent.load_session(cwd=str(tmp_path), session_id=session)
        with pytest.raises(RequestError, match=r"invalid session id '\.\./x'") as bad_id:
            await r.agent.load_session(cwd=str(tmp_path), session_id="../x")
        assert (bad_id.value.code, bad_id.value.data) == (-32602, {"code": "SESSION_ID"})
        assert [a.id for a in r.root.agents.list()] == ["main", "acp-1"]


async def test_a_load_needs_a_template_agent(tmp_path: Path) -> None:
    sessions = stored(tmp_path / "s")
    async with acp_rig(tmp_path, plugins=sessions, core={"model": None}) as r:
        with pytest.raises(RequestError, match="there is no agent to serve"):
            await r.agent.load_session(cwd=str(tmp_path), session_id="abc")
