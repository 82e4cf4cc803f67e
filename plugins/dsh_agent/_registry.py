"""The ``AgentRegistry`` service: live agents, the factory that makes them, their events."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from dsh import Context, Disposer, DshError, Service, hookspec
from dsh_llm import LlmFailure, LlmRequest, Message
from dsh_session import Session
from dsh_system_prompt import AssembleContext

from ._decision import HookDecision

__all__ = [
    "Agent",
    "AgentArgumentError",
    "AgentError",
    "AgentFactory",
    "AgentRegistry",
    "AgentSpecs",
    "AgentTypeError",
    "NoModelError",
    "StepBlocked",
    "assemble_context_for",
]


class AgentError(DshError, RuntimeError):
    """An agent could not be registered, created or used as asked: a taken id, no
    factory or a second one, a message sent to a disposed agent."""

    code = "AGENT"


class NoModelError(AgentError):
    """A turn had no model to call: the agent names none and no ``agent/request``
    listener supplied one."""

    code = "NO_MODEL"


class AgentArgumentError(DshError, ValueError):
    """An agent was given an unusable value: an empty id, a ``max_tokens`` that is not
    a positive integer, both ``cwd`` and ``session``."""

    code = "AGENT_ARGUMENT"


class AgentTypeError(DshError, TypeError):
    """Something of the wrong type reached an agent: a message that is neither a
    ``str`` nor a ``dsh_llm.Message``, or a listener of ``agent/pre-step`` or
    ``agent/request`` that returned the wrong kind of value."""

    code = "AGENT_TYPE"


class StepBlocked(DshError, RuntimeError):
    """Raised by an ``agent/pre-step`` listener to refuse a step: the turn ends
    ``{"kind": "blocked", "message": str(error)}`` and no request is sent."""

    code = "STEP_BLOCKED"


class Agent(Protocol):
    """What every agent handle offers (the agent loop provides the implementation)."""

    id: str
    model: str | None
    max_tokens: int | None
    session: Session
    ctx: Context

    @property
    def cwd(self) -> str | None:
        """The working directory of the agent's session."""

    @property
    def status(self) -> str:
        """``"idle"`` or ``"running"``."""

    def send(self, message: str | Message) -> None:
        """Queue a message; each queued message starts its own turn."""

    def steer(self, message: str | Message) -> None:
        """Add a message to the running turn's next step (or queue it when idle)."""

    def cancel(self) -> None:
        """Abort the running turn (it ends ``aborted``) and drop queued messages."""

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
        max_tokens: int | None,
    ) -> Agent:
        """A new agent owned by ``owner``'s fiber (disposed when that fiber unloads)."""
        ...

    async def resume_agent(self, owner: Context, session: Session, agent_id: str | None) -> Agent:
        """An agent continuing the stored ``session`` (see :meth:`AgentRegistry.resume`)."""
        ...


class AgentSpecs:
    """The events owned by the agent registry; all are dispatched with ``scope=agent``."""

    @hookspec
    def agent_created(self, agent: Agent) -> None:
        """An agent was registered. A listener that raises vetoes the registration."""

    @hookspec
    def agent_disposed(self, agent: Agent) -> None:
        """An agent's registration was removed."""

    @hookspec
    def agent_status(self, agent: Agent, status: str) -> None:
        """The agent went ``"running"`` or ``"idle"`` (only on a change)."""

    @hookspec
    def agent_error(self, agent: Agent, turn: int, step: int, error: BaseException) -> None:
        """A turn failed with ``error``; it ends with reason ``error``."""

    @hookspec
    def agent_turn_start(self, agent: Agent, turn: int) -> None:
        """A turn started (its ``turn/start`` is recorded); emitted only when heard
        (RFC 0042). A listener's failure is logged."""

    @hookspec
    def agent_turn_end(self, agent: Agent, turn: int, reason: dict[str, Any]) -> None:
        """A turn ended with ``reason`` (its ``turn/end``: completed, max-tokens,
        aborted, blocked or error); emitted only when heard. A listener's failure is
        logged."""

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

    @hookspec
    def agent_request_failed(
        self, agent: Agent, request: LlmRequest, failure: LlmFailure
    ) -> bool | None:
        """Serial: a model request failed before the model produced anything. A
        listener that returns True has made a retry worthwhile (compaction shortened
        the history after a ``CONTEXT_LENGTH`` refusal): the loop ends the step and
        runs the turn on in a new step, once; otherwise the turn fails."""

    # -- the loop events of RFC 0036 (ARCHITECTURE §6.14) --------------------------------

    @hookspec
    def tool_before(self, call: Any) -> HookDecision | None:
        """Serial, before a tool call runs: ``call`` is its ``dsh_tools.ToolCall``
        (``name``, ``arguments``, ``agent``). The first :class:`HookDecision` answered
        wins; None: no opinion."""

    @hookspec
    def tool_after(self, call: Any, result: Any) -> str | None:
        """After a call ran (``result`` is its ``dsh_tools.ToolResult``): every
        listener is called, in order, and each text one returns is appended to what
        the model reads of the result."""

    @hookspec
    def user_prompt(self, agent: Agent, message: Message) -> HookDecision | None:
        """Serial, for each message that starts a turn, before it is recorded: the
        first :class:`HookDecision` wins (``deny`` drops the turn's messages and ends
        it ``blocked`` with the reason; ``context`` is added to the turn)."""

    @hookspec
    def turn_stop(self, agent: Agent, turn: int) -> str | None:
        """Serial, when a turn would end because the model asked for no tool: a text
        keeps it going (another step runs with the text as a user message, within
        ``max_steps``)."""

    @hookspec
    def session_start(self, agent: Agent, session: Session) -> None:
        """Parallel: the agent's driver starts, before its first turn (a new session,
        or a resumed one: then ``session.events`` already holds its turns)."""

    @hookspec
    def session_end(self, agent: Agent, session: Session) -> None:
        """Parallel: the driver of an agent that heard ``session/start`` stops (the
        agent is disposed: closed, renewed, or its front-end ended)."""


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
        #: Looked up once: an agent's arrival and departure are emitted only when heard.
        self._created_event = ctx.events.event("agent/created")
        self._disposed_event = ctx.events.event("agent/disposed")

    def register(self, agent: Agent) -> Disposer:
        """Make ``agent`` visible by id while the caller lives; returns the exact disposer.

        Emits ``agent/created`` (a listener that raises rolls the registration back and
        the error reaches the caller) and, on removal, ``agent/disposed``. A taken id
        raises :class:`AgentError`.
        """
        self._refuse_taken(agent)

        def body() -> Iterator[Callable[[], None]]:
            yield self._hold(agent)
            if self._created_event.heard(agent):
                self.home_ctx.emit("agent/created", agent, scope=agent)

        return self.ctx.effect(body, label=f"agent {agent.id}")

    def _refuse_taken(self, agent: Agent) -> None:
        if agent.id in self._agents:
            raise AgentError(f'agent "{agent.id}" is already registered')

    def _hold(self, agent: Agent) -> Callable[[], None]:
        self._agents[agent.id] = agent
        return functools.partial(self._unregister, agent)

    def _register_undo(self, agent: Agent) -> Callable[[], None] | None:
        """:meth:`register` for the agent factory, whose own effect holds what it
        returns: the undo, as a plain callable (no effect of its own). None, with
        nothing done, when ``agent/created`` is heard: then :meth:`register` it (a
        listener that raises rolls the registration back)."""
        if self._created_event.heard(agent):
            return None
        self._refuse_taken(agent)
        return self._hold(agent)

    def _unregister(self, agent: Agent) -> None:
        del self._agents[agent.id]
        if self._disposed_event.heard(agent):
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
        max_tokens: int | None = None,
    ) -> Agent:
        """A new agent owned by the calling plugin, made by the factory."""
        if not self._factory:
            raise AgentError("no agent factory registered (load the agent-loop plugin)")
        return self._factory[0].create_agent(
            self.ctx,
            id=id,
            model=model,
            cwd=cwd,
            persona=persona,
            session=session,
            max_tokens=max_tokens,
        )

    async def resume(self, session_id: str, agent_id: str | None = None) -> Agent:
        """An agent that continues the stored session ``session_id``.

        The session is loaded through the persistence backend (``sessions.load``).
        The agent is ``agent_id``, else the agent the session was recorded for; when
        that agent is declared in the loop's config it is replaced by one with the same
        model and persona (it must be idle with an empty session). A turn the process
        died in is closed as interrupted.
        """
        if not self._factory:
            raise AgentError("no agent factory registered (load the agent-loop plugin)")
        session = await self.ctx.sessions.load(session_id)
        return await self._factory[0].resume_agent(self.ctx, session, agent_id)

    async def switch_model(self, agent_id: str, model: str) -> Agent:
        """Make agent ``agent_id`` use ``model`` from now on; returns the agent to use.

        An agent that is idle with nothing recorded in its session yet (a declared
        agent before its first message) is replaced, through the factory's
        ``resume_agent``, by one on a new session whose header records ``model``: the
        same id, cwd and (for an agent the loop declares) persona. Any other agent keeps
        its session and only its ``model`` changes (each step's ``request/header``
        records the model used). Raises :class:`AgentError` for an unknown agent.
        """
        agent = self._known(agent_id)
        if agent.status == "idle" and not agent.session.events and self._factory:
            header = agent.session.header
            session = self.ctx.sessions.prepare(
                cwd=header.cwd, meta={**header.meta, "model": model}
            )
            agent = await self._factory[0].resume_agent(self.ctx, session, agent_id)
        agent.model = model
        return agent

    async def renew(self, agent_id: str) -> Agent:
        """Start agent ``agent_id`` afresh (a chat's ``/clear``); returns the new agent.

        The agent is disposed (a running turn ends ``aborted``/``disposed``) and
        replaced, through the factory's ``resume_agent``, by one with the same id,
        model and cwd (and, for an agent the loop declares, persona) on a new, empty
        session. The old session stays with its persistence (``dsh run --resume``
        continues it). Raises :class:`AgentError` for an unknown agent or without a
        factory.
        """
        agent = self._known(agent_id)
        if not self._factory:
            raise AgentError("no agent factory registered (load the agent-loop plugin)")
        model = agent.model
        header = agent.session.header
        session = self.ctx.sessions.prepare(cwd=header.cwd, meta={**header.meta, "model": model})
        await agent.dispose()
        renewed = await self._factory[0].resume_agent(self.ctx, session, agent_id)
        renewed.model = model
        return renewed

    def _known(self, agent_id: str) -> Agent:
        agent = self.get(agent_id)
        if agent is None:
            known = ", ".join(f'"{a.id}"' for a in self._agents.values()) or "(none)"
            raise AgentError(f'unknown agent "{agent_id}"; known agents: {known}')
        return agent

    def get(self, agent_id: str) -> Agent | None:
        """The live agent ``agent_id``, or None."""
        return self._agents.get(agent_id)

    def list(self) -> list[Agent]:
        """Live agents in registration order."""
        return list(self._agents.values())

    @staticmethod
    def assemble_context_for(agent: Agent) -> AssembleContext:
        """The assembly context of ``agent``: its scope and the agent itself."""
        return assemble_context_for(agent)
