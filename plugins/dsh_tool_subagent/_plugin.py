"""The ``tool-subagent`` plugin: one subagent tool, following its provider."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, field_validator

from dsh import CheckReport, Context, Disposer, DshError, InactiveContextError, Plugin
from dsh_subagent import SubagentProvider, SubagentRequest, SubagentResult, SubagentRun
from dsh_subagent_inprocess import result_of
from dsh_tools import TOOL_NAME, Tool, ToolCall, ToolResult

from ._shared import claim_tool_name, remember, share_control_tools
from ._wording import describe_tool, parameters_for

__all__ = [
    "SubagentToolError",
    "ToolFilter",
    "ToolSubagent",
    "ToolSubagentConfig",
    "background_notice",
    "failure",
]

_log = logging.getLogger("dsh.tool-subagent")

#: The first line of the error result of a run that did not complete, by stop reason.
_HEADLINES = {
    "aborted": "subagent run was cancelled",
    "error": "subagent run failed",
    "max-tokens": "subagent run hit its token limit before finishing",
    "refusal": "subagent declined the task",
}

#: How a background notice says the child ended, by stop reason.
_SETTLED = {
    "completed": "finished and will do no further work unless you send it more.",
    "aborted": "was stopped before it finished.",
}


class SubagentToolError(DshError, ValueError):
    """A subagent tool cannot be offered as configured (its provider cannot enforce
    ``max_depth``)."""

    code = "SUBAGENT_TOOL"


class ToolFilter(BaseModel):
    """Which of the parent's tools the child keeps (``tools.restrict`` on the child)."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] | None = None
    deny: list[str] | None = None


class ToolSubagentConfig(BaseModel):
    """Config of one ``tool-subagent`` instance."""

    model_config = ConfigDict(extra="forbid")

    #: The provider the tool starts children with (``spawn``, ``fork``, ...).
    provider: str = Field(min_length=1)
    #: The tool's name; each instance needs its own.
    tool_name: str = "subagent"
    #: The child's persona (shadows the deployment persona for it).
    persona: str | None = None
    #: The tools the child keeps.
    tool_filter: ToolFilter | None = None
    #: How deep delegation may nest (None: as deep as the provider allows).
    max_depth: int | None = Field(default=3, ge=0)
    #: The child's model (default: the parent's).
    model: str | None = None
    #: Offer ``run_in_background``.
    enable_run_in_background: bool = True

    @field_validator("tool_name")
    @classmethod
    def _tool_name(cls, value: str) -> str:
        if not TOOL_NAME.fullmatch(value):
            raise ValueError(f"tool_name must match ^[a-zA-Z0-9_-]{{1,64}}$, got {value!r}")
        return value

    @field_validator("tool_filter")
    @classmethod
    def _some_filter(cls, value: ToolFilter | None) -> ToolFilter | None:
        if value is not None and value.allow is None and value.deny is None:
            raise ValueError("tool_filter needs allow or deny (an empty filter restricts nothing)")
        return value


def failure(result: SubagentResult) -> ToolResult:
    """The error result of a foreground run that did not complete."""
    text = _HEADLINES[result.stop_reason]
    if result.diagnostic:
        text += f"\nDiagnostic: {result.diagnostic}"
    if result.output:
        text += f"\nPartial output before the run ended:\n{result.output}"
    code = "SUBAGENT_" + result.stop_reason.upper().replace("-", "_")
    return ToolResult(f"Error: {text}", True, code)


def background_notice(subagent_id: str, result: SubagentResult) -> str:
    """The message a parent's next turn receives when a background child settles."""
    how = _SETTLED.get(result.stop_reason, "failed before it finished.")
    closing = (
        f"Its closing message:\n{result.output}" if result.output else "It left no closing message."
    )
    return f"Background subagent {subagent_id} {how}\n{closing}"


class ToolSubagent(Plugin):
    """A tool that delegates to a subagent provider. It exists only while the provider
    is registered and is worded by it: it follows ``subagent/provider-added`` and
    ``subagent/provider-removed`` whatever order the plugins load in."""

    name = "tool-subagent"
    Config = ToolSubagentConfig
    inject = ("subagents", "tools", "agents")

    def __init__(self, ctx: Context, config: ToolSubagentConfig) -> None:
        super().__init__(ctx, config)
        self._mounted: Disposer | None = None
        self._told = False

    def setup(self) -> Iterator[Callable[[], object]]:
        ctx = self.ctx
        config: ToolSubagentConfig = self.config
        yield claim_tool_name(ctx, config.tool_name)
        yield share_control_tools(ctx)
        # Subscribe first, then look: a provider registered in between is not missed.
        yield ctx.on("subagent/provider-added", self._added)
        yield ctx.on("subagent/provider-removed", self._removed)
        yield ctx.on("deployment/check", self._check)
        yield ctx.on("agent/status", self._running)
        yield self._unmount
        provider = ctx.subagents.get_provider(config.provider)
        if provider is not None:
            self._mount(provider)

    # -- a provider that is not there ---------------------------------------------------

    def unregistered(self) -> str | None:
        """``<file>:<line>: tool "<name>": subagent provider "<p>" is not registered;
        known: <names>`` while the provider is missing, else None."""
        config: ToolSubagentConfig = self.config
        subagents = self.ctx.subagents
        if subagents.get_provider(config.provider) is not None:
            return None
        entry = self.ctx.fiber.entry
        where = f"{entry.locate(('provider',))}: " if entry is not None else ""
        known = ", ".join(sorted(p.name for p in subagents.list())) or "(none)"
        return (
            f'{where}tool "{config.tool_name}": subagent provider "{config.provider}" is not '
            f"registered; known: {known}"
        )

    def _check(self, report: CheckReport) -> None:
        line = self.unregistered()
        if line is not None:
            report.fail(line)

    def _running(self, agent: Any, status: str) -> None:
        """The first turn of the run: say what ``dsh check`` says, once."""
        if status == "running" and not self._told:
            self._told = True
            line = self.unregistered()
            if line is not None:
                _log.error("%s", line)

    # -- following the provider ---------------------------------------------------------

    def _added(self, provider: SubagentProvider) -> None:
        if provider.name == self.config.provider:
            self._unmount()  # a provider replacing another: reworded
            with contextlib.suppress(InactiveContextError):  # unloading: mount nothing
                self._mount(provider)

    def _removed(self, name: str) -> None:
        if name == self.config.provider:
            self._unmount()

    def _mount(self, provider: SubagentProvider) -> None:
        config: ToolSubagentConfig = self.config
        if config.max_depth is not None and "depth_limit" not in provider.capabilities:
            raise SubagentToolError(
                f'tool "{config.tool_name}": subagent provider "{provider.name}" cannot '
                f"enforce max_depth {config.max_depth} (no depth_limit capability); set "
                "max_depth: null to leave the depth to the provider"
            )
        background = config.enable_run_in_background
        inherits = provider.inherits_parent_context
        self._mounted = self.ctx.tools.register(
            Tool(
                name=config.tool_name,
                description=describe_tool(inherits, background),
                parameters=parameters_for(inherits, background),
                execute=self._execute,
            )
        )

    def _unmount(self) -> None:
        mounted, self._mounted = self._mounted, None
        if mounted is not None:
            mounted()

    # -- one call -----------------------------------------------------------------------

    async def _execute(self, args: Any, call: ToolCall) -> str | ToolResult:
        config: ToolSubagentConfig = self.config
        parent = call.agent
        if parent is None:
            return ToolResult(
                "Error: the subagent tool needs a calling agent", True, "INVALID_ARGS"
            )
        tool_filter = None if config.tool_filter is None else config.tool_filter.model_dump()
        request = SubagentRequest(
            prompt=args.prompt,
            parent=parent,
            persona=config.persona,
            tool_filter=tool_filter,
            max_depth=config.max_depth,
            model=config.model,
        )
        run = await self.ctx.subagents.start(config.provider, request)
        remember(self.ctx, run.agent, args.description)
        if getattr(args, "run_in_background", False):
            _notify_when_settled(run, parent)
            return f"started subagent {run.id}"
        return await _foreground(run)


def _notify_when_settled(run: SubagentRun, parent: Any) -> None:
    """Tell ``parent`` each time the background child settles (a turn of it ends): a
    notice queued as the parent's next turn."""
    child = run.agent
    seed = child.session.header.meta.get("seed_length", 0)

    def on_status(agent: Any, status: str) -> None:
        if status == "idle":
            result = result_of(child.session, child.session.last_turn(), seed)
            try:
                parent.send(background_notice(run.id, result))
            except Exception as exc:  # the parent is disposed: nobody to tell
                _log.debug("no notice for subagent %s: %s", run.id, exc)

    child.ctx.on("agent/status", on_status)  # heard for the child only (its scope)


async def _foreground(run: SubagentRun) -> str | ToolResult:
    """Wait for the child's answer, then dispose it; cancelling the call cancels and
    awaits the child."""
    child = run.agent
    try:
        result = await run.result
    finally:
        with anyio.CancelScope(shield=True):
            await child.dispose()
    if result.stop_reason == "completed":
        return result.output
    return failure(result)
