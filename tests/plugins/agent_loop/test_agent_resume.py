"""agents.resume: an agent continues a stored session (with an in-memory backend)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

import dsh
from dsh.testing import ScriptedModel
from dsh_agent import AgentArgumentError, AgentError
from dsh_agent_core import AgentCore
from dsh_session import Session, SessionEvent, SessionHeader
from tests.support import event_types

pytestmark = pytest.mark.anyio


class Store:
    """A persistence backend in memory: what session/event saw, served by session/open."""

    def __init__(self) -> None:
        self.headers: dict[str, SessionHeader] = {}
        self.events: dict[str, list[SessionEvent]] = {}

    def plugin(self, ctx: dsh.Context, config: None) -> Any:
        def record(session: Session, event: SessionEvent) -> None:
            self.headers[session.id] = session.header
            self.events.setdefault(session.id, []).append(event)

        def open_(session_id: str) -> Any:
            if session_id not in self.headers:
                return None
            return self.headers[session_id], list(self.events[session_id])

        yield ctx.on("session/event", record)
        yield ctx.on("session/open", open_)


@asynccontextmanager
async def runtime(store: Store, **core: Any) -> AsyncIterator[tuple[dsh.Context, ScriptedModel]]:
    """agent-core on a model answering each request with the number of messages it
    was sent, persisted to ``store``."""
    async with dsh.Context() as root:
        model = ScriptedModel(
            respond=lambda request: f"{len(request.messages)} messages", models=["echo"]
        )
        config = {"model": "echo", **core}
        await root.plugin(AgentCore, config)
        model.install(root)
        await root.plugin(store.plugin)
        yield root, model


async def one_turn(store: Store, **core: Any) -> str:
    """Run one turn of agent "main" in a runtime of its own; the id of its session."""
    async with runtime(store, **core) as (root, _):
        agent = root.agents.get("main")
        agent.send("hello")
        await agent.when_idle()
        session_id: str = agent.session.id
        return session_id


def crash_in_turn_two(store: Store, session_id: str) -> None:
    """Leave the stored log after turn 2's start, as a crash would."""
    events = store.events[session_id]
    events.append(SessionEvent(len(events), "turn/start", 0.0, {"turn": 2}))


async def test_a_declared_agent_continues_its_session_with_model_and_persona() -> None:
    store = Store()
    core = {"agents": [{"id": "main", "persona": "You are Main on {{model}}."}]}
    sid = await one_turn(store, **core)
    async with runtime(store, **core) as (root, model):
        fresh = root.agents.get("main")
        resumed = await root.agents.resume(sid)
        assert resumed.id == "main"
        assert resumed is not fresh
        assert root.agents.get("main") is resumed
        assert resumed.model == "echo"
        resumed.send("again")
        await resumed.when_idle()
        (request,) = model.requests
        assert request.system is not None
        assert request.system.endswith("You are Main on echo.")
        assert [m.role for m in request.messages] == ["user", "assistant", "user"]
        assert resumed.session.turn_end(2) == {"kind": "completed"}
        assert root.sessions.get(sid) is resumed.session


async def test_a_turn_left_open_is_closed_as_interrupted_and_persisted() -> None:
    store = Store()
    sid = await one_turn(store)
    crash_in_turn_two(store, sid)
    async with runtime(store) as (root, _):
        resumed = await root.agents.resume(sid, "main")
        assert resumed.session.turn_end(2) == {"kind": "interrupted"}
        assert event_types(resumed.session)[-2:] == ["turn/start", "turn/end"]
        assert store.events[sid][-1].type == "turn/end"


async def test_an_undeclared_agent_takes_the_model_recorded_in_the_session() -> None:
    store = Store()
    async with runtime(store) as (root, _):
        helper = root.agents.create("helper", model="echo")
        helper.send("hi")
        await helper.when_idle()
        sid = helper.session.id
    async with runtime(store) as (root, _):
        resumed = await root.agents.resume(sid)
        assert resumed.id == "helper"
        assert resumed.model == "echo"
        assert root.agents.get("main") is not None


async def test_resume_refuses_a_busy_agent_and_names_missing_agents() -> None:
    store = Store()
    async with runtime(store) as (root, _):
        agent = root.agents.get("main")
        agent.send("hello")
        await agent.when_idle()
        sid = agent.session.id
        nameless = root.sessions.create(meta={})
        nameless.append("turn/start", {"turn": 1})
    async with runtime(store) as (root, _):
        main = root.agents.get("main")
        main.send("busy")
        await main.when_idle()
        # "main" already has a session with events: it cannot take another.
        with pytest.raises(AgentError, match='agent "main" is already running its own'):
            await root.agents.resume(sid)
    async with runtime(store, agents=[{"id": "a"}, {"id": "b"}]) as (root, _):
        with pytest.raises(AgentArgumentError, match="names no agent; choose one of: a, b"):
            await root.agents.resume(nameless.id)
        resumed = await root.agents.resume(sid, "b")
        assert resumed.id == "b"
    async with runtime(store) as (root, _):
        # A session naming no agent goes to the only declared one.
        resumed = await root.agents.resume(nameless.id)
        assert resumed.id == "main"
        assert resumed.session.turn_end(1) == {"kind": "interrupted"}


async def test_a_resume_whose_repair_fails_leaves_no_agent() -> None:
    store = Store()
    sid = await one_turn(store)
    crash_in_turn_two(store, sid)
    async with runtime(store) as (root, _):
        failing = [True]

        def refuse(session: Session, event: SessionEvent) -> None:
            if failing[0] and event.type == "turn/end":
                raise OSError("disk full")

        root.on("session/event", refuse)
        with pytest.raises(OSError, match="disk full"):
            await root.agents.resume(sid)
        assert root.agents.get("main") is None
        assert root.sessions.get(sid) is None
        failing[0] = False
        resumed = await root.agents.resume(sid)
        assert resumed.session.turn_end(2) == {"kind": "interrupted"}


async def test_resume_needs_a_factory() -> None:
    async with dsh.Context() as root:
        from dsh_agent import AgentRegistry

        await root.plugin(AgentRegistry)
        with pytest.raises(AgentError, match="no agent factory registered"):
            await root.agents.resume("anything")


# -- agents.switch_model ------------------------------------------------------------------


async def test_switch_model_before_the_first_message_starts_a_session_recording_it() -> None:
    store = Store()
    core = {"agents": [{"id": "main", "persona": "You are Main on {{model}}."}]}
    async with runtime(store, **core) as (root, model):
        model.install(root, ["other"])
        before = root.agents.get("main")
        cwd = before.cwd
        agent = await root.agents.switch_model("main", "other")
        assert agent is not before
        assert root.agents.get("main") is agent
        assert agent.model == "other"
        assert agent.session.header.meta == {"agent": "main", "model": "other"}
        assert agent.cwd == cwd
        agent.send("hi")
        await agent.when_idle()
        (request,) = model.requests
        assert request.model == "other"
        assert request.system.endswith("You are Main on other.")  # the declared persona
        assert store.headers[agent.session.id].meta["model"] == "other"


async def test_switch_model_of_an_agent_with_history_keeps_its_session() -> None:
    store = Store()
    sid = await one_turn(store)
    async with runtime(store) as (root, model):
        model.install(root, ["other"])
        resumed = await root.agents.resume(sid)
        agent = await root.agents.switch_model("main", "other")
        assert agent is resumed
        assert agent.session.id == sid
        assert agent.model == "other"
        assert agent.session.header.meta["model"] == "echo"  # the header stays as stored
        agent.send("again")
        await agent.when_idle()
        assert model.requests[-1].model == "other"
        with pytest.raises(AgentError, match='unknown agent "nope"; known agents: "main"'):
            await root.agents.switch_model("nope", "other")


# -- agents.renew -------------------------------------------------------------------------


async def test_renew_starts_a_new_session_keeping_model_persona_and_cwd() -> None:
    store = Store()
    core = {"agents": [{"id": "main", "persona": "You are Main on {{model}}."}]}
    async with runtime(store, **core) as (root, model):
        model.install(root, ["other"])
        old = await root.agents.switch_model("main", "other")
        old.send("hello")
        await old.when_idle()
        heard: list[str] = []
        root.on("agent/disposed", lambda agent: heard.append(f"disposed {agent.id}"))
        root.on("agent/created", lambda agent: heard.append(f"created {agent.id}"))
        agent = await root.agents.renew("main")
        assert heard == ["disposed main", "created main"]
        assert agent is not old
        assert root.agents.get("main") is agent
        assert agent.session.id != old.session.id
        assert agent.session.events == []
        assert agent.cwd == old.cwd
        assert agent.model == "other"
        assert agent.session.header.meta == {"agent": "main", "model": "other"}
        assert root.sessions.get(old.session.id) is None  # released, still stored
        assert event_types(old.session)[-1] == "turn/end"
        agent.send("again")
        await agent.when_idle()
        request = model.requests[-1]
        assert request.model == "other"
        assert request.system.endswith("You are Main on other.")
        assert [m.text for m in request.messages] == ["again"]  # nothing of before
        assert sorted(store.headers) == sorted([old.session.id, agent.session.id])


async def test_renew_refuses_an_unknown_agent() -> None:
    async with runtime(Store()) as (root, _):
        with pytest.raises(AgentError, match='unknown agent "nope"; known agents: "main"'):
            await root.agents.renew("nope")
