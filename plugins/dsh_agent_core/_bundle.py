"""The ``agent-core`` bundle: the spine of an agent deployment in one entry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from dsh import Disposer, Plugin
from dsh_agent import AgentRegistry
from dsh_agent_loop import AgentLoop, AgentLoopConfig, AgentSpec
from dsh_llm import Llm
from dsh_session import Sessions
from dsh_slash_commands import SlashCommands
from dsh_system_prompt import SystemPrompt
from dsh_tools import Tools

__all__ = ["AgentCore", "AgentCoreConfig"]


class AgentCoreConfig(AgentLoopConfig):
    """Config of the ``agent-core`` bundle: the loop's keys (``agents``,
    ``max_parallel_tool_calls``, ``max_steps``, ``max_turn_tokens``, ``prices``) plus the
    default model and the system prompt's."""

    model: str | None = None
    persona: str = ""
    tool_order: list[str] | None = None


class AgentCore(Plugin):
    """Starts the system prompt, tools, model calls, sessions, agents, the slash-command
    registry and the loop.

    ``persona`` and ``tool_order`` go to the system prompt; ``agents`` declares the
    agents (each without a ``model`` gets the bundle's). With no ``agents`` and a
    ``model``, one agent ``main`` is declared.
    """

    name = "agent-core"
    Config = AgentCoreConfig

    async def setup(self) -> AsyncIterator[Disposer]:
        config: AgentCoreConfig = self.config
        agents = [
            spec if spec.model is not None else spec.model_copy(update={"model": config.model})
            for spec in config.agents
        ]
        if not agents and config.model is not None:
            agents = [AgentSpec(id="main", model=config.model)]
        ctx = self.ctx
        parts: list[tuple[Any, Any]] = [
            (SystemPrompt, {"persona": config.persona, "tool_order": config.tool_order}),
            (Llm, None),
            (Sessions, None),
            (AgentRegistry, None),
            (Tools, None),
            (SlashCommands, None),
            (
                AgentLoop,
                {
                    "agents": [a.model_dump() for a in agents],
                    "max_parallel_tool_calls": config.max_parallel_tool_calls,
                    "max_steps": config.max_steps,
                    "max_turn_tokens": config.max_turn_tokens,
                    "prices": {m: p.model_dump() for m, p in config.prices.items()},
                },
            ),
        ]
        fibers = [ctx.plugin(plugin, part_config) for plugin, part_config in parts]
        # Yielded in start order, undone in reverse: the loop first, the prompt last.
        for fiber in fibers:
            yield fiber.dispose
        # Active only once every part is: a part that fails fails the bundle.
        for fiber in fibers:
            await fiber
