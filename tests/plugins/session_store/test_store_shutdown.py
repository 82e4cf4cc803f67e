"""Shutting down mid-turn, for each store: every record the agent made is stored, and
the turn ends ``aborted``/``disposed`` — whatever order the deployment lists its
plugins in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from dsh import Context, Disposer, FiberState
from dsh.testing import Mark, ScriptedModel, Wait, state, text, tool_call, tool_calls, until
from dsh_agent_core import AgentCore
from dsh_session import Session
from dsh_tools import Tool, ToolCall
from tests.plugins.session_store.store_support import Store
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


def stored(store: Store, session: Session) -> list[tuple[int, str, Any]]:
    return [(r["seq"], r["type"], r["data"]) for r in store.records(session.id)]


def in_memory(session: Session) -> list[tuple[int, str, Any]]:
    return [(e.seq, e.type, dict(e.data)) for e in session.events]


@pytest.mark.parametrize("store_first", [True, False])
async def test_disposing_the_root_mid_tool_call_keeps_every_record(
    store: Store, store_first: bool
) -> None:
    started = anyio.Event()
    model = ScriptedModel(tool_calls(tool_call("block", id="c1")))
    async with Context() as root:
        parts: list[tuple[Any, Any]] = [
            (AgentCore, {"model": "scripted"}),
            (blocking_tool(started), None),
        ]
        backend = (store.plugin, store.config())
        parts.insert(0, backend) if store_first else parts.append(backend)
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
    assert stored(store, session) == in_memory(session)


async def test_disposing_the_root_mid_stream_keeps_every_record(store: Store) -> None:
    streaming = anyio.Event()
    model = ScriptedModel([*text("partial ")[:2], Mark(streaming), Wait(anyio.Event())])
    async with Context() as root:
        root.plugin(AgentCore, {"model": "scripted"})
        root.plugin(store.plugin, store.config())
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
    assert stored(store, session) == in_memory(session)


async def test_unloading_persistence_alone_lets_the_running_turn_finish(store: Store) -> None:
    # Only the persistence plugin goes: the agent lives on; its running turn is
    # recorded to the end before the file closes, and nothing after it.
    started = anyio.Event()
    release = anyio.Event()
    model = ScriptedModel([Mark(started), Wait(release), *text("done")])
    async with Context() as root:
        root.plugin(AgentCore, {"model": "scripted"})
        backend = root.plugin(store.plugin, store.config())
        await root.settle()
        model.install(root)
        agent = root.agents.get("main")
        agent.send("hi")
        await started.wait()

        async def unload() -> None:
            await backend.dispose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(unload)
            await until(lambda: state(backend) is FiberState.UNLOADING)
            await anyio.lowlevel.checkpoint()
            assert state(backend) is FiberState.UNLOADING  # waiting for the turn to end
            release.set()
        assert state(backend) is FiberState.DISPOSED
        await agent.when_idle()
        session = agent.session
        assert stored(store, session) == in_memory(session)
        assert session.turn_end(1) == {"kind": "completed"}
