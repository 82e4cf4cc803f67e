"""A fenced-off writer stops: once its store refuses a commit with ``SESSION_FENCED``
(a newer ``sessions.lease()`` took the session over), the agent ends its turn and
refuses every later message at once; the model is not called again and nothing more
reaches the store. On a real store: session-jsonl and session-sqlite."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import dsh
from dsh.testing import Mark, ScriptedModel, Wait, tool_call, tool_calls
from dsh_agent_core import AgentCore
from dsh_agent_loop._agent import _fence_of
from dsh_session import SessionFencedError, Sessions
from dsh_session_jsonl import JsonlSessions
from dsh_session_sqlite import SqliteSessions

pytestmark = pytest.mark.anyio

STORES = ["jsonl", "sqlite"]


async def add_store(root: dsh.Context, tmp_path: Path, store: str) -> None:
    if store == "jsonl":
        await root.plugin(JsonlSessions, {"root": str(tmp_path / "sessions")})
    else:
        await root.plugin(SqliteSessions, {"path": str(tmp_path / "sessions.db")})


@asynccontextmanager
async def other_process(tmp_path: Path, store: str) -> AsyncIterator[Any]:
    """The sessions of another root on the same store (as another process has)."""
    async with dsh.Context() as other:
        await other.plugin(Sessions)
        await add_store(other, tmp_path, store)
        yield other.sessions


async def take_over(tmp_path: Path, store: str) -> None:
    """A newer attempt takes the lease of session "s": the first writer is fenced off."""
    async with other_process(tmp_path, store) as sessions:
        await sessions.lease("s")


async def stored(tmp_path: Path, store: str) -> list[dict[str, Any]]:
    """The events the store holds of session "s", read by another process."""
    async with other_process(tmp_path, store) as sessions:
        session = await sessions.snapshot("s")
        return [event.to_json() for event in session.events]


@asynccontextmanager
async def leased_agent(
    tmp_path: Path, store: str, model: ScriptedModel
) -> AsyncIterator[tuple[dsh.Context, Any, list[BaseException]]]:
    """agent-core on ``model`` and ``store``; an agent writing session "s" under a
    lease; the errors it reported (``agent/error``)."""
    async with dsh.Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        await add_store(root, tmp_path, store)
        model.install(root)
        errors: list[BaseException] = []
        root.on("agent/error", lambda agent, turn, step, exc: errors.append(exc))
        await root.sessions.lease("s")
        session = root.sessions.prepare("s")
        agent = root.agents.create("writer", model="m", session=session)
        yield root, agent, errors


@pytest.mark.parametrize("store", STORES)
async def test_a_fenced_writer_ends_its_turn_and_takes_no_more(tmp_path: Path, store: str) -> None:
    model = ScriptedModel("first answer", respond=lambda request: "more", models=["m"])
    async with leased_agent(tmp_path, store, model) as (_, agent, errors):
        agent.send("one")
        await agent.when_idle()
        assert agent.session.turn_end(1) == {"kind": "completed"}
        await take_over(tmp_path, store)
        before = await stored(tmp_path, store)
        agent.send("two")
        agent.send("three")  # queued behind the fenced turn: dropped with it
        await agent.when_idle()
        reason = agent.session.turn_end(2)
        assert reason is not None
        assert (reason["kind"], reason["code"]) == ("error", "SESSION_FENCED")
        assert [type(e) for e in errors] == [SessionFencedError]
        assert agent.session.last_turn() == 2
        for later in (agent.send, agent.steer):
            with pytest.raises(SessionFencedError, match="a newer attempt took the session"):
                later("four")
        await agent.when_idle()
        assert len(model.requests) == 1  # the fenced turn never reached the model
        assert await stored(tmp_path, store) == before
        assert [type(e) for e in errors] == [SessionFencedError]


@pytest.mark.parametrize("store", STORES)
async def test_a_writer_fenced_mid_turn_calls_no_tool_and_no_model(
    tmp_path: Path, store: str
) -> None:
    streaming, go_on = anyio.Event(), anyio.Event()
    calls = tool_calls(tool_call("echo", id="c1"))
    model = ScriptedModel(
        lambda request: [Mark(streaming), Wait(go_on), *calls(request)],
        respond=lambda request: "again",
        models=["m"],
    )
    async with leased_agent(tmp_path, store, model) as (_, agent, errors):
        agent.send("call a tool")
        await streaming.wait()
        await take_over(tmp_path, store)
        before = await stored(tmp_path, store)
        go_on.set()
        await agent.when_idle()
        reason = agent.session.turn_end(1)
        assert reason is not None
        assert reason["code"] == "SESSION_FENCED"
        assert "tool/call" not in [e.type for e in agent.session.events]
        assert len(model.requests) == 1
        with pytest.raises(SessionFencedError):
            agent.send("more")
        assert await stored(tmp_path, store) == before
        assert [type(e) for e in errors] == [SessionFencedError]


def test_a_fence_is_found_in_the_groups_of_concurrent_tool_calls() -> None:
    fence = SessionFencedError("taken over")
    nested = BaseExceptionGroup("calls", [KeyError("x"), ExceptionGroup("inner", [fence])])
    assert _fence_of(nested) is fence
    assert _fence_of(ExceptionGroup("calls", [KeyError("x")])) is None
