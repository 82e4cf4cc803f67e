"""What the model would see: the prompt views of ``dsh prompt`` and ``dsh check``.

A view is one agent's assembly (its scope and the agent) or the global one. The agents
come from the ``agents`` service when a deployment loads one; it is an optional
collaborator here (the agent registry depends on the system prompt, not the reverse),
so it is reached by key and used through its documented methods only.
"""

from __future__ import annotations

from typing import Any

from dsh import CheckReport, CommandError, Context, DshError, counted

from ._render import render_prompt
from ._types import AssembleContext, ToolSchema

__all__ = ["check_prompts", "model_view", "select_agents"]


def select_agents(ctx: Context, agent_id: str | None, *, every: bool) -> list[Any]:
    """The agents a command looks at; ``[]`` means the global view.

    With ``agent_id``: that agent (unknown: :class:`dsh.CommandError` listing the known
    ids). Without: every agent when ``every`` (check), else the only one when exactly
    one exists (prompt, run).
    """
    agents = ctx.get("agents")
    known: list[Any] = [] if agents is None else agents.list()
    if agent_id is not None:
        for agent in known:
            if agent.id == agent_id:
                return [agent]
        ids = ", ".join(f'"{a.id}"' for a in known) or "(none)"
        raise CommandError(f'unknown agent "{agent_id}"; known agents: {ids}')
    if every or len(known) == 1:
        return known
    return []


async def model_view(ctx: Context, agent: Any = None) -> tuple[str, list[ToolSchema]]:
    """The rendered system prompt and the ordered tools ``agent`` (None: the global
    view) would get now."""
    context = AssembleContext() if agent is None else ctx.agents.assemble_context_for(agent)
    assembly = await ctx.system_prompt.assemble(context)
    return render_prompt(assembly), assembly.tools


async def check_prompts(ctx: Context, report: CheckReport) -> None:
    """The ``deployment/check`` listener: every agent's prompt (or the global one)
    assembles and renders; the success phrase counts each view's tools."""
    try:
        chosen = select_agents(ctx, report.agent, every=True)
    except CommandError as exc:
        report.fail(str(exc))
        return
    rendered: list[str] = []
    failed = False
    for agent in chosen or [None]:
        try:
            _, tools = await model_view(ctx, agent)
        except DshError as exc:
            of = "" if agent is None else f' of agent "{agent.id}"'
            report.fail(f"{report.path}: the system prompt{of} does not render: {exc}")
            failed = True
            continue
        name = "" if agent is None else f'"{agent.id}" '
        rendered.append(f"{name}({counted(len(tools), 'tool')})")
    if not failed:
        views = "" if not chosen else " for agents" if len(chosen) > 1 else " for agent"
        report.ok(f"prompt renders{views} {', '.join(rendered)}")
