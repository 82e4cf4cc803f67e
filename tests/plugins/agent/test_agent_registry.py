"""The agent registry: registration, the factory seam, queries, events and ownership."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh import Context, Disposer
from dsh_agent import (
    Agent,
    AgentError,
    AgentRegistry,
    assemble_context_for,
)
from dsh_agent_loop import AgentLoop
from dsh_llm import Llm, Message
from dsh_session import Session, SessionHeader, Sessions
from dsh_system_prompt import AssembleContext, PromptSection, SystemPrompt
from dsh_tools import Tools
from tests.plugins.tools.tools_support import make_tool

pytestmark = pytest.mark.anyio


@dataclass
class FakeAgent:
    """The smallest thing that satisfies the ``Agent`` protocol."""

    id: str
    ctx: Context
    model: str | None = None
    max_tokens: int | None = None
    session: Session = field(default_factory=lambda: Session(SessionHeader("s", 0.0)))
    sent: list[str | Message] = field(default_factory=list)

    @property
    def cwd(self) -> str | None:
        return None

    @property
    def status(self) -> str:
        return "idle"

    def send(self, message: str | Message) -> None:
        self.sent.append(message)

    def steer(self, message: str | Message) -> None:
        self.sent.append(message)

    def cancel(self) -> None:
        self.sent.clear()

    async def when_idle(self) -> None:
        return None

    async def dispose(self) -> None:
        return None


@dataclass
class HeardAgents:
    created: list[str] = field(default_factory=list)
    disposed: list[str] = field(default_factory=list)


@asynccontextmanager
async def registry() -> AsyncIterator[tuple[Context, AgentRegistry, HeardAgents]]:
    async with Context() as root:
        await root.plugin(AgentRegistry)
        heard = HeardAgents()

        def created(agent: Agent) -> None:
            heard.created.append(agent.id)

        def disposed(agent: Agent) -> None:
            heard.disposed.append(agent.id)

        root.on("agent/created", created)
        root.on("agent/disposed", disposed)
        yield root, root.agents, heard


async def test_register_returns_the_exact_disposer() -> None:
    async with registry() as (root, agents, heard):
        agent = FakeAgent("a", root)
        disposer = agents.register(agent)
        assert isinstance(disposer, Disposer)
        assert agents.get("a") is agent
        assert heard.created == ["a"]
        await disposer()
        assert agents.get("a") is None
        assert heard.disposed == ["a"]
        await disposer()  # a second call undoes nothing more
        assert heard.disposed == ["a"]


async def test_a_composite_adopts_the_registration() -> None:
    async with registry() as (root, agents, heard):
        order: list[str] = []

        def owner(ctx: Context, config: None) -> Iterator[Any]:
            def wiring() -> Iterator[Any]:
                yield lambda: order.append(f"last, with {[a.id for a in agents.list()]}")
                yield ctx.agents.register(FakeAgent("a", ctx))

            yield ctx.effect(wiring)

        fiber = await root.plugin(owner)
        await fiber.dispose()
        assert order == ["last, with []"]
        assert heard.disposed == ["a"]


async def test_a_taken_id_is_refused() -> None:
    async with registry() as (root, agents, heard):
        agents.register(FakeAgent("a", root))
        with pytest.raises(AgentError, match='agent "a" is already registered') as info:
            agents.register(FakeAgent("a", root))
        assert info.value.code == "AGENT"
        assert heard.created == ["a"]


async def test_a_raising_created_listener_vetoes_the_registration() -> None:
    async with registry() as (root, agents, heard):

        def veto(agent: Agent) -> None:
            raise RuntimeError("vetoed")

        root.on("agent/created", veto)
        with pytest.raises(RuntimeError, match="vetoed"):
            agents.register(FakeAgent("a", root))
        assert agents.list() == []
        assert heard.disposed == ["a"]


async def test_get_and_list_in_registration_order() -> None:
    async with registry() as (root, agents, _heard):
        made = [FakeAgent(name, root) for name in ("zed", "amy", "kim")]
        for agent in made:
            agents.register(agent)
        assert agents.list() == made
        assert agents.get("amy") is made[1]
        assert agents.get("bob") is None


async def test_events_are_scoped_to_their_agent() -> None:
    async with registry() as (root, agents, heard):
        first = FakeAgent("first", root)
        second = FakeAgent("second", root)
        mine: list[str] = []

        def listener(agent: Agent) -> None:
            mine.append(agent.id)

        root.scoped(first).on("agent/created", listener)
        root.scoped(first).on("agent/disposed", listener)
        stop_first = agents.register(first)
        stop_second = agents.register(second)
        await stop_second()
        await stop_first()
        assert mine == ["first", "first"]
        assert heard.created == ["first", "second"]
        assert heard.disposed == ["second", "first"]


async def test_the_factory_seat() -> None:
    async with registry() as (root, agents, _heard):
        with pytest.raises(AgentError, match=r"no agent factory registered \(load the agent-loop"):
            agents.create("a")
        calls: list[tuple[Context, dict[str, Any]]] = []

        class Factory:
            def create_agent(self, owner: Context, **options: Any) -> Agent:
                calls.append((owner, options))
                return FakeAgent(options["id"], owner)

            async def resume_agent(self, owner: Context, session: Any, agent_id: Any) -> Agent:
                raise NotImplementedError

        factory = Factory()
        seat = agents.set_factory(factory)
        assert isinstance(seat, Disposer)
        with pytest.raises(AgentError, match="an agent factory is already registered"):
            agents.set_factory(Factory())
        agent = agents.create("a", model="m", cwd="/c", persona="p", max_tokens=5)
        assert agent.id == "a"
        ((owner, options),) = calls
        assert owner.fiber is root.fiber
        assert options == {
            "id": "a",
            "model": "m",
            "cwd": "/c",
            "persona": "p",
            "session": None,
            "max_tokens": 5,
        }
        await seat()
        with pytest.raises(AgentError, match="no agent factory registered"):
            agents.create("b")
        agents.set_factory(factory)
        assert agents.create("c").id == "c"


async def test_create_is_owned_by_the_caller() -> None:
    async with registry() as (root, _agents, _heard):
        owners: list[Context] = []

        class Factory:
            def create_agent(self, owner: Context, **options: Any) -> Agent:
                owners.append(owner)
                return FakeAgent("x", owner)

            async def resume_agent(self, owner: Context, session: Any, agent_id: Any) -> Agent:
                raise NotImplementedError

        root.agents.set_factory(Factory())

        def plugin(ctx: Context, config: None) -> None:
            ctx.agents.create()

        fiber = await root.plugin(plugin)
        assert [o.fiber for o in owners] == [fiber]


async def test_switch_model_without_a_factory_only_sets_the_model() -> None:
    async with registry() as (root, agents, _heard):
        with pytest.raises(AgentError, match='unknown agent "a"; known agents: \\(none\\)'):
            await agents.switch_model("a", "m")
        agent = FakeAgent("a", root)
        agents.register(agent)
        assert await agents.switch_model("a", "m") is agent
        assert agent.model == "m"


async def test_renew_needs_a_factory() -> None:
    async with registry() as (root, agents, _heard):
        agents.register(FakeAgent("a", root))
        with pytest.raises(AgentError, match="no agent factory registered"):
            await agents.renew("a")


async def test_assemble_context_for() -> None:
    async with registry() as (root, agents, _heard):
        agent = FakeAgent("a", root)
        assert assemble_context_for(agent) == AssembleContext(scope=agent, agent=agent)
        assert agents.assemble_context_for(agent) == AssembleContext(scope=agent, agent=agent)


# -- ownership, with the real loop --------------------------------------------------------


async def test_disposing_the_owner_disposes_its_agents_and_their_scopes() -> None:
    async with Context() as root:
        for part in (SystemPrompt, Llm, Sessions, AgentRegistry, Tools, AgentLoop):
            await root.plugin(part)
        disposed: list[str] = []

        def on_disposed(agent: Agent) -> None:
            disposed.append(agent.id)

        root.on("agent/disposed", on_disposed)
        made: list[Agent] = []

        def owner(ctx: Context, config: None) -> None:
            agent = ctx.agents.create("owned", model="m", persona="Scoped persona.")
            agent.ctx.tools.register(make_tool("private"))
            agent.ctx.system_prompt.section(PromptSection(name="extra", order=5, text="Extra."))
            made.append(agent)

        fiber = await root.plugin(owner)
        (agent,) = made
        view = assemble_context_for(agent)
        before = await root.system_prompt.assemble(view)
        assert [t.name for t in before.tools] == ["private"]
        assert [s.name for s in before.sections][-2:] == ["deployment:persona", "extra"]
        assert root.agents.get("owned") is agent
        await fiber.dispose()
        assert disposed == ["owned"]
        assert root.agents.list() == []
        assert root.sessions.list() == []
        after = await root.system_prompt.assemble(view)
        assert after.tools == []
        assert [s.name for s in after.sections] == ["harness:identity", "deployment:persona"]
        assert after.sections[1].text == ""
