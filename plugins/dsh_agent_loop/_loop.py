"""The ``agent-loop`` plugin: the agent factory and the ``model``/``cwd`` variables."""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dsh import Context, Plugin
from dsh_agent import AgentError
from dsh_scope import create_scope
from dsh_session import Session
from dsh_system_prompt import AssembleContext, PromptSection

from ._agent import LoopAgent

__all__ = ["AgentLoop", "AgentLoopConfig", "AgentSpec"]


class AgentSpec(BaseModel):
    """One agent declared in the config."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    model: str | None = None
    persona: str | None = None
    cwd: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)


class AgentLoopConfig(BaseModel):
    """Config of the ``agent-loop`` plugin."""

    model_config = ConfigDict(extra="forbid")

    agents: list[AgentSpec] = []
    max_parallel_tool_calls: int = Field(default=8, gt=0)


def _model_of(context: AssembleContext) -> str | None:
    agent: Any = context.agent
    return None if agent is None else agent.model


def _cwd_of(context: AssembleContext) -> str | None:
    agent: Any = context.agent
    return None if agent is None else agent.cwd


class AgentLoop(Plugin):
    """Makes agents whose turns call the model and run tools."""

    name = "agent-loop"
    Config = AgentLoopConfig
    inject = ("agents", "sessions", "llm", "tools", "system_prompt")

    def __init__(self, ctx: Context, config: AgentLoopConfig) -> None:
        super().__init__(ctx, config)
        self._ids = itertools.count(1)

    def setup(self) -> Any:
        ctx = self.ctx
        ids = [spec.id for spec in self.config.agents]
        for agent_id in ids:
            if ids.count(agent_id) > 1:
                raise AgentError(f'agent-loop config declares agent "{agent_id}" twice')
        yield ctx.agents.set_factory(self)
        yield ctx.system_prompt.variable("model", _model_of)
        yield ctx.system_prompt.variable("cwd", _cwd_of)
        for spec in self.config.agents:
            self.create_agent(
                ctx,
                id=spec.id,
                model=spec.model,
                cwd=spec.cwd,
                persona=spec.persona,
                session=None,
                max_tokens=spec.max_tokens,
            )

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
    ) -> LoopAgent:
        """A new agent owned by ``owner``'s fiber; see :class:`dsh_agent.AgentFactory`."""
        agent_id = id or f"agent-{next(self._ids)}"
        if owner.agents.get(agent_id) is not None:
            raise AgentError(f'agent "{agent_id}" is already registered')
        agent = LoopAgent(self, agent_id, model, max_tokens)
        scope = create_scope(owner, agent)
        agent._scope = scope
        agent.ctx = actx = scope.ctx
        if session is None:
            meta = {"agent": agent_id, "model": model}
            session = actx.sessions.create(cwd=cwd, meta=meta)
        agent.session = session
        if persona is not None:
            actx.system_prompt.section(
                PromptSection(name="deployment:persona", order=0, text=persona)
            )
        actx.agents.register(agent)
        actx.task(agent.drive, label=f"agent {agent_id}")
        return agent
