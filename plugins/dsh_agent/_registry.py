"""The ``AgentRegistry`` service: live agents, the factory that makes them, their events."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from dsh import Context, Disposer, DshError, Service, hookspec
from dsh_llm import LlmRequest, Message
from dsh_session import Session
from dsh_system_prompt import AssembleContext

__all__ = [
    "Agent",
    "AgentError",
    "AgentFactory",
    "AgentRegistry",
    "AgentSpecs",
    "StepBlocked",
    "assemble_context_for",
]


class AgentError(DshError, RuntimeError):
    """An agent could not be registered, created or run as asked."""

    code = "AGENT"


class StepBlocked(DshError, RuntimeError):
    """Raised by an ``agent/pre-step`` listener to refuse a step: the turn ends
    ``blocked`` with this message and no request is sent."""

    code = "STEP_BLOCKED"


class Agent(Protocol):
    """What every agent handle offers (the agent loop provides the implementation)."""

    id: str
    model: str | None
    session: Session
    ctx: Context

    @property
    def cwd(self) -> str | None:
        """The working directory the agent's session was created with."""

    @property
    def status(self) -> str:
        """``"idle"`` or ``"running"``."""

    def send(self, message: str | Message) -> None:
        """Queue a message; each queued message starts its own turn."""

    def steer(self, message: str | Message) -> None:
        """Add a message to the running turn's next step (or start a turn when idle)."""

    def cancel(self) -> None:
        """Abort the running turn (recorded as aborted) and drop queued messages."""

    def when_idle(self) -> Awaitable[None]:
        """Wait until no turn runs and nothing is queued."""

    def dispose(self) -> Awaitable[None]:
        """Cancel, wait, and undo everything registered through ``agent.ctx``."""


class AgentFactory(Protocol):
    """Makes agents; the agent loop registers itself as the factory."""

    def create_agent(
        self,
        owner: Context,
        *,
        id: str | None,
        model: str | None,
        cwd: str | None,
        persona: str | None,
        session: Session | None,
    ) -> Agent:
        """A new agent owned by ``owner``'s fiber (disposed when that fiber unloads)."""
        ...


class AgentSpecs:
    """The events owned by the agent registry; all are dispatched with ``scope=agent``."""

    @hookspec
    def agent_created(self, agent: Agent) -> None:
        """An agent was registered."""

    @hookspec
    def agent_disposed(self, agent: Agent) -> None:
        """An agent's registration was removed."""

    @hookspec
    def agent_status(self, agent: Agent, status: str) -> None:
        """The agent went ``"running"`` or ``"idle"``."""

    @hookspec
    def agent_error(self, agent: Agent, turn: int, step: int, error: BaseException) -> None:
        """A turn failed; it ended with reason ``error``."""

    @hookspec
    def agent_pre_step(
        self, agent: Agent, messages: list[Message], turn: int, step: int, call_next: Any
    ) -> list[Message]:
        """Waterfall over the new messages about to be sent in a step; return the list
        to send. Raise :class:`StepBlocked` to refuse the step."""
        raise NotImplementedError

    @hookspec
    def agent_request(self, agent: Agent, request: LlmRequest, call_next: Any) -> LlmRequest:
        """Waterfall over each model request of an agent; return the request to send."""
        raise NotImplementedError


def assemble_context_for(agent: Agent) -> AssembleContext:
    """The assembly context of ``agent``: its scope and the agent itself."""
    return AssembleContext(scope=agent, agent=agent)


class AgentRegistry(Service):
    """Live agents by id, the agent factory, and agent events (ctx key ``agents``)."""

    key = "agents"
    name = "agents"
    hookspecs = AgentSpecs

    def __init__(self, ctx: Context, config: Any) -> None:
        super().__init__(ctx, config)
        self._agents: dict[str, Agent] = {}
        self._factory: list[AgentFactory] = []

    def register(self, agent: Agent) -> Disposer:
        """Make ``agent`` visible by id while the caller lives; returns the exact disposer."""
        if agent.id in self._agents:
            raise AgentError(f'agent "{agent.id}" is already registered')

        def body() -> Iterator[Callable[[], None]]:
            self._agents[agent.id] = agent
            yield functools.partial(self._unregister, agent)
            self.home_ctx.emit("agent/created", agent, scope=agent)

        return self.ctx.effect(body, label=f"agent {agent.id}")

    def _unregister(self, agent: Agent) -> None:
        del self._agents[agent.id]
        self.home_ctx.emit("agent/disposed", agent, scope=agent)

    def set_factory(self, factory: AgentFactory) -> Disposer:
        """Install the agent factory (one at a time); returns the exact disposer."""
        if self._factory:
            raise AgentError("an agent factory is already registered")

        def body() -> Iterator[Callable[[], None]]:
            self._factory.append(factory)
            yield self._factory.clear

        return self.ctx.effect(body, label="agent factory")

    def create(
        self,
        id: str | None = None,
        *,
        model: str | None = None,
        cwd: str | None = None,
        persona: str | None = None,
        session: Session | None = None,
    ) -> Agent:
        """A new agent owned by the calling plugin, made by the factory."""
        if not self._factory:
            raise AgentError("no agent factory registered (load the agent-loop plugin)")
        return self._factory[0].create_agent(
            self.ctx, id=id, model=model, cwd=cwd, persona=persona, session=session
        )

    def get(self, agent_id: str) -> Agent | None:
        return self._agents.get(agent_id)

    def list(self) -> list[Agent]:
        """Live agents in registration order."""
        return list(self._agents.values())

    @staticmethod
    def assemble_context_for(agent: Agent) -> AssembleContext:
        """The assembly context of ``agent``: its scope and the agent itself."""
        return assemble_context_for(agent)
