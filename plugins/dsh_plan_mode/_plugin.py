"""The ``PlanMode`` service: an agent that may only read until the user approves its
plan."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dsh import Context, Disposer, DshError, Service, hookspec
from dsh_approval import ApprovalRequest
from dsh_slash_commands import SlashCommand, SlashInvocation
from dsh_system_prompt import PromptSection
from dsh_tools import Tool, ToolCall, ToolResult

__all__ = [
    "EXIT_TOOL",
    "READ_ONLY_TOOLS",
    "SECTION",
    "SECTION_TEXT",
    "ExitPlanArgs",
    "PlanMode",
    "PlanModeConfig",
    "PlanModeError",
    "PlanModeSpecs",
]

#: The tools an agent keeps in plan mode (those the deployment has).
READ_ONLY_TOOLS = ("read", "glob", "grep", "web_fetch", "web_search", "todo_write", "skill")
#: The tool that asks the user to approve the plan.
EXIT_TOOL = "exit_plan_mode"
#: The section an agent in plan mode gets, and its order (after the skills).
SECTION = "mode:plan"
SECTION_ORDER = 70
SECTION_TEXT = (
    "Plan mode is on: the user wants a plan before any change. Only read-only tools "
    "work now; do not try to change files, run commands or start other work. Study what "
    f"the task needs, then call `{EXIT_TOOL}` with your plan: concrete steps, the files "
    "each step touches, how the result will be checked. The user approves it (plan mode "
    "ends and you carry it out) or asks for changes (plan mode stays)."
)

_EXIT_DESCRIPTION = (
    "Present your plan to the user and ask to carry it out. Call it in plan mode once the "
    "plan is ready, with the whole plan as Markdown. If the user approves, plan mode ends, "
    "every tool is available again and the plan comes back as the user's message; if "
    "not, you stay in plan mode: ask what to change."
)


class PlanModeError(DshError, PermissionError):
    """A tool other than the read-only ones was called in plan mode."""

    code = "PLAN_MODE"


class PlanModeSpecs:
    """The events owned by plan mode."""

    @hookspec
    def plan_mode_change(self, agent: Any, active: bool) -> None:
        """``agent`` entered (``active``) or left plan mode (emitted, unfiltered)."""


class ExitPlanArgs(BaseModel):
    """The plan to present to the user."""

    model_config = ConfigDict(extra="forbid")

    plan: str = Field(description="The plan, in Markdown.", min_length=1)


class PlanModeConfig(BaseModel):
    """Config of ``plan-mode``."""

    model_config = ConfigDict(extra="forbid")

    #: The tools an agent keeps in plan mode (those the deployment registers).
    tools: list[str] = Field(default_factory=lambda: list(READ_ONLY_TOOLS))


class PlanMode(Service):
    """Plan mode per agent (ctx key ``plan_mode``): ``/plan`` and :meth:`enter` restrict
    the agent to read-only tools (refusing any other call with ``PLAN_MODE``), add the
    ``mode:plan`` section and the ``exit_plan_mode`` tool; :meth:`leave` undoes it."""

    key = "plan_mode"
    name = "plan-mode"
    Config = PlanModeConfig
    inject = ("tools", "system_prompt", "slash_commands")
    hookspecs = PlanModeSpecs

    def __init__(self, ctx: Context, config: PlanModeConfig) -> None:
        ctx.events.add_hookspecs(PlanModeSpecs)
        super().__init__(ctx, config)
        #: The agents in plan mode, each with what undoes it.
        self._active: dict[Any, Disposer] = {}

    def setup(self) -> Iterator[Callable[[], object]]:
        yield self.ctx.slash_commands.register(
            SlashCommand(
                name="plan",
                description="read-only tools until you approve a plan (/plan off leaves)",
                argument_hint="[GOAL | off]",
                run=self._command,
            )
        )
        yield self._leave_all

    def _leave_all(self) -> None:
        for agent in list(self._active):
            self.leave(agent)

    # -- the public API -----------------------------------------------------------------

    def active(self, agent: Any) -> bool:
        """Whether ``agent`` is in plan mode."""
        return agent in self._active

    def enter(self, agent: Any) -> bool:
        """Put ``agent`` in plan mode; False when it already was. Undone with the
        agent (or this plugin)."""
        if agent in self._active:
            return False
        tools = agent.ctx.tools
        keep = [name for name in self.config.tools if name in self.home_ctx.tools.names()]
        scoped: Context = agent.ctx

        def body() -> Iterator[Callable[[], object]]:
            yield tools.register(
                Tool(
                    name=EXIT_TOOL,
                    description=_EXIT_DESCRIPTION,
                    parameters=ExitPlanArgs,
                    execute=self._exit,
                )
            )
            # own=True: tools registered in the agent's own scope are refused too.
            yield tools.restrict(allow=[*keep, EXIT_TOOL], refusal=self._refusal, own=True)
            yield scoped.system_prompt.section(
                PromptSection(name=SECTION, order=SECTION_ORDER, text=SECTION_TEXT)
            )
            yield lambda: self._forget(agent)

        self._active[agent] = scoped.effect(body, label="plan mode")
        self.home_ctx.emit("plan-mode/change", agent, True)
        return True

    def leave(self, agent: Any) -> bool:
        """Take ``agent`` out of plan mode; False when it was not in it."""
        undo = self._active.get(agent)
        if undo is None:
            return False
        undo()
        return True

    def _forget(self, agent: Any) -> None:
        del self._active[agent]
        self.home_ctx.emit("plan-mode/change", agent, False)

    # -- enforcement --------------------------------------------------------------------

    def _refusal(self, name: str) -> ToolResult:
        kept = [n for n in self.config.tools if n in self.home_ctx.tools.names()]
        error = PlanModeError(
            f'plan mode: "{name}" cannot run until the user approves a plan; available now: '
            f"{', '.join([*kept, EXIT_TOOL])}. Call {EXIT_TOOL} with your plan."
        )
        return ToolResult(content=f"Error: {error}", is_error=True, code=error.code)

    async def _exit(self, args: ExitPlanArgs, call: ToolCall) -> str:
        """``exit_plan_mode``: show the plan and ask; yes → leave plan mode and steer
        the plan into the turn as the user's message."""
        agent = call.agent
        approval = self.home_ctx.get("approval")
        if approval is None:
            raise PlanModeError(
                "nobody can approve the plan: the deployment has no approval service "
                "(add `- name: approval`); the user can leave plan mode with /plan off"
            )
        request = ApprovalRequest(
            kind="plan",
            title=f"carrying out this plan\n\n{args.plan}\n\n(plan mode ends)",
            detail=args.plan,
            call=call,
            always_ask=True,
        )
        if not await approval.request(request):
            return (
                "The user did not approve the plan: plan mode stays on. Ask what to "
                "change, or revise the plan and call exit_plan_mode again."
            )
        self.leave(agent)
        agent.steer(args.plan)
        return (
            "The user approved the plan: plan mode is off and every tool is available. "
            "The plan follows as the user's message; carry it out."
        )

    # -- /plan --------------------------------------------------------------------------

    async def _command(self, invocation: SlashInvocation) -> None:
        agent = invocation.agent
        goal = invocation.arguments
        if goal == "off":
            left = self.leave(agent)
            invocation.reply("plan mode: off" if left else "plan mode was not on")
            return
        entered = self.enter(agent)
        if entered or not goal:
            invocation.reply(
                "plan mode: on (read-only tools until you approve a plan; /plan off leaves)"
                if entered
                else "plan mode is already on (/plan off leaves)"
            )
        if goal:
            await invocation.send(goal)
