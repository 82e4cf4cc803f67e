"""The ``agent-loop`` plugin: the agent factory and the ``model``/``cwd`` variables."""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dsh import CheckReport, Context, Plugin
from dsh_agent import AgentArgumentError, AgentError
from dsh_scope import create_scope
from dsh_session import Session
from dsh_system_prompt import AssembleContext, PromptSection

from ._agent import LoopAgent
from ._limits import DEFAULT_MAX_STEPS
from ._usage import USAGE_EVENT, Price, session_usage

__all__ = ["AgentLoop", "AgentLoopConfig", "AgentSpec"]


class AgentSpec(BaseModel):
    """One agent declared in the config."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    model: str | None = None
    persona: str | None = None
    cwd: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    #: This agent's turn limits; None: the loop's (``AgentLoopConfig``).
    max_steps: int | None = Field(default=None, gt=0)
    max_turn_tokens: int | None = Field(default=None, gt=0)


class AgentLoopConfig(BaseModel):
    """Config of the ``agent-loop`` plugin."""

    model_config = ConfigDict(extra="forbid")

    agents: list[AgentSpec] = []
    max_parallel_tool_calls: int = Field(default=8, gt=0)
    #: The turn limits of every agent that is given none of its own (RFC 0031): the
    #: steps a turn may take, and the tokens it may use (each step's whole prompt and
    #: its output, reported or estimated, summed over the turn); None: no token limit.
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, gt=0)
    max_turn_tokens: int | None = Field(default=None, gt=0)
    #: Per-model prices (per million tokens) that turn usage into cost; none built in.
    prices: dict[str, Price] = {}

    @field_validator("agents")
    @classmethod
    def unique_ids(cls, agents: list[AgentSpec]) -> list[AgentSpec]:
        """No agent id may repeat (the bundle's config inherits this check)."""
        ids = [spec.id for spec in agents]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"agent ids must be unique; repeated: {', '.join(repeated)}")
        return agents


def _model_of(context: AssembleContext) -> str | None:
    agent: Any = context.agent
    return None if agent is None else agent.model


def _cwd_of(context: AssembleContext) -> str | None:
    agent: Any = context.agent
    return None if agent is None else agent.cwd


class AgentLoop(Plugin):
    """Makes agents whose turns call the model and run tools (the agent factory)."""

    name = "agent-loop"
    Config = AgentLoopConfig
    inject = ("agents", "sessions", "llm", "tools", "system_prompt")

    def __init__(self, ctx: Context, config: AgentLoopConfig) -> None:
        super().__init__(ctx, config)
        self._ids = itertools.count(1)
        #: The registry, read through the loop's own view (the loop injects it: a new
        #: registry restarts the loop); what registers through it uses the caller's.
        self._registry = ctx.agents
        #: The session store, the same way (what enters it through the loop is held
        #: by the agent's own effect, see ``create_agent``).
        self._sessions = ctx.sessions
        self._agents: dict[LoopAgent, None] = {}
        #: The bus, whose count of changes revalidates each agent's :class:`Hearing`.
        self.events = events = ctx.events
        #: The agent waterfalls, looked up once: a step skips one nobody listens to.
        self.pre_step = events.event("agent/pre-step")
        self.request = events.event("agent/request")
        #: The loop events of RFC 0036, looked up once the same way: each is
        #: dispatched only when someone in the agent's scope listens.
        self.tool_before = events.event("tool/before")
        self.tool_after = events.event("tool/after")
        self.user_prompt = events.event("user/prompt")
        self.turn_stop = events.event("turn/stop")
        self.session_start = events.event("session/start")
        self.session_end = events.event("session/end")
        #: A turn's start and end (RFC 0042), for observers such as ``otel``.
        self.turn_started = events.event("agent/turn-start")
        self.turn_ended = events.event("agent/turn-end")
        #: An agent's status changes, emitted only when someone listens.
        self.status_changed = events.event("agent/status")

    def setup(self) -> Iterator[Callable[[], object]]:
        ctx = self.ctx
        yield ctx.agents.set_factory(self)
        yield ctx.system_prompt.variable("model", _model_of)
        yield ctx.system_prompt.variable("cwd", _cwd_of)
        yield ctx.on("deployment/check", self._check)
        yield ctx.sessions.declare_event_types(USAGE_EVENT)
        # Unloading the factory disposes every agent it made, wherever they are owned.
        yield self._dispose_agents
        for spec in self.config.agents:
            self.create_agent(
                ctx,
                id=spec.id,
                model=spec.model,
                # A declared agent works where the deployment is run from.
                cwd=spec.cwd or os.getcwd(),
                persona=spec.persona,
                session=None,
                max_tokens=spec.max_tokens,
                max_steps=spec.max_steps,
                max_turn_tokens=spec.max_turn_tokens,
            )

    def _check(self, report: CheckReport) -> None:
        """``dsh check``: every agent has a model that an adapter serves.

        A listener of ``agent/request`` or ``llm/request`` may supply or replace the
        model, so with one present the problems are warnings.
        """
        ctx = self.ctx
        served = ctx.llm.models()
        rewritten = any(
            ctx.events.event(name).listeners() for name in ("agent/request", "llm/request")
        )
        note = report.warn if rewritten else report.fail
        known = ", ".join(f'"{m}"' for m in served) or "(none)"
        for agent in self._agents:
            if report.agent is not None and agent.id != report.agent:
                continue
            if agent.model is None:
                note(
                    f'{report.path}: agent "{agent.id}" has no model: set `model` on '
                    "agent-core (or on the agent in `agents`)"
                )
            elif agent.model not in served:
                note(
                    f'{report.path}: agent "{agent.id}" uses model "{agent.model}", which '
                    f"no adapter serves; known models: {known}"
                )

    def _dispose_agents(self) -> Awaitable[None] | None:
        agents = list(self._agents)
        if not agents:
            return None

        async def dispose_all() -> None:
            for agent in agents:
                await agent.dispose()

        return dispose_all()

    async def resume_agent(
        self, owner: Context, session: Session, agent_id: str | None
    ) -> LoopAgent:
        """An agent continuing ``session``; see :meth:`dsh_agent.AgentRegistry.resume`."""
        declared = {spec.id: spec for spec in self.config.agents}
        meta_agent = session.header.meta.get("agent")
        if agent_id is None:
            agent_id = meta_agent if isinstance(meta_agent, str) else None
        if agent_id is None and len(declared) == 1:
            agent_id = next(iter(declared))
        if agent_id is None:
            raise AgentArgumentError(
                f'session "{session.id}" names no agent; choose one of: '
                f"{', '.join(declared) or '(none declared)'}"
            )
        spec = declared.get(agent_id)
        existing = owner.agents.get(agent_id)
        if existing is not None:
            if existing.status != "idle" or existing.session.events:
                raise AgentError(
                    f'agent "{agent_id}" is already running its own session; '
                    f'cannot resume session "{session.id}" into it'
                )
            await existing.dispose()
        model = session.header.meta.get("model")
        agent = self.create_agent(
            self.ctx if spec is not None else owner,
            id=agent_id,
            model=spec.model if spec is not None else (model if isinstance(model, str) else None),
            cwd=None,
            persona=spec.persona if spec is not None else None,
            session=session,
            max_tokens=spec.max_tokens if spec is not None else None,
            max_steps=spec.max_steps if spec is not None else None,
            max_turn_tokens=spec.max_turn_tokens if spec is not None else None,
        )
        try:
            session.close_open_turn()
        except BaseException:
            await agent.dispose()  # nothing half-resumed stays registered
            raise
        return agent

    def create_agent(
        self,
        owner: Context,
        *,
        id: str | None,
        model: str | None,
        cwd: str | None,
        persona: str | None,
        session: Session | None,
        max_tokens: int | None = None,
        max_steps: int | None = None,
        max_turn_tokens: int | None = None,
    ) -> LoopAgent:
        """A new agent owned by ``owner``'s fiber; see :class:`dsh_agent.AgentFactory`.

        Its scope (``agent.ctx``) is a child of ``owner``'s fiber. Without ``session``
        it gets a new session (with ``cwd``). A turn limit not given (None) is that of
        the agent whose scope ``owner`` is (a subagent's parent), else the config's.
        Raises :class:`AgentError` for a taken id and :class:`AgentArgumentError` for
        an empty id, a ``max_tokens``, ``max_steps`` or ``max_turn_tokens`` that is not
        a positive integer, or both ``cwd`` and ``session``; nothing is left behind.
        """
        agents = self._registry
        taken = None  # the agent that holds the given id (refused below)
        if id is None:
            while True:  # the first free one
                free = f"agent-{next(self._ids)}"
                if agents.get(free) is None:
                    break
            id = free
        else:
            given: object = id
            if not isinstance(given, str) or not given:
                raise AgentArgumentError(f"an agent id must be a non-empty string, got {id!r}")
            taken = agents.get(id)
        for name, checked in (
            ("max_tokens", max_tokens),
            ("max_steps", max_steps),
            ("max_turn_tokens", max_turn_tokens),
        ):
            value: object = checked
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise AgentArgumentError(
                    f'agent "{id}": {name} must be a positive integer, got {checked!r}'
                )
        if session is not None and cwd is not None:
            raise AgentArgumentError(
                f'agent "{id}": pass cwd= for a new session or session=, not both '
                "(the cwd of a session is in its header)"
            )
        if taken is not None:
            raise AgentError(f'agent "{id}" is already registered')
        parent: Any = owner.scope
        limits: Any = parent if isinstance(parent, LoopAgent) else self.config
        agent = LoopAgent(
            self,
            id,
            model,
            max_tokens,
            max_steps=limits.max_steps if max_steps is None else max_steps,
            max_turn_tokens=limits.max_turn_tokens if max_turn_tokens is None else max_turn_tokens,
        )
        scope = create_scope(owner, agent)
        agent._scope = scope
        agent.ctx = actx = scope.ctx
        sessions = self._sessions
        # A session that is not in the store yet (new, or loaded for a resume) joins it
        # with the agent and leaves with it.
        own_session = session is None or sessions.get(session.id) is not session
        agent.session = (
            session
            if session is not None
            else sessions.prepare(cwd=cwd, meta={"agent": id, "model": model})
        )
        if session is not None:  # what the steps before recorded
            agent._usage = session_usage(session)
            agent._estimated = session_usage(session, estimated=True)

        def wiring() -> Iterator[Callable[[], object]]:
            # One composite, undone last-in-first-out: the agent stops taking messages,
            # it leaves the registry, and the session leaves the store last. The
            # driver task, started by the first message, is an effect of the scope
            # made after this one: it stops (the running turn records its end) first.
            if own_session:
                held = sessions._enter_undo(agent.session, agent)
                yield held if held is not None else actx.sessions.enter(agent.session)
            if persona is not None:
                yield actx.system_prompt.section(
                    PromptSection(name="deployment:persona", order=0, text=persona)
                )
            self._agents[agent] = None
            yield functools.partial(self._agents.pop, agent, None)
            registered = agents._register_undo(agent)
            yield registered if registered is not None else actx.agents.register(agent)
            yield agent._close

        try:
            actx.effect(wiring, label=f"agent {id}")
        except BaseException:
            scope.fiber.dispose()
            raise
        return agent
