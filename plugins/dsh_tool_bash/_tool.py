"""The ``tool-bash`` plugin: the ``bash`` tool and its guidance section."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from dsh import Context, Disposer, Plugin
from dsh_approval import ApprovalRequest
from dsh_bash import BashRequest, BashSandbox
from dsh_system_prompt import PromptSection
from dsh_tools import Tool, ToolArgumentsError, ToolCall

from ._render import render_result
from ._sandbox import sandbox_guidance

__all__ = [
    "BACKGROUND_SENTENCE",
    "DESCRIPTION",
    "GUIDANCE",
    "BackgroundBashArgs",
    "BashArgs",
    "SandboxedBackgroundBashArgs",
    "SandboxedBashArgs",
    "ToolBash",
    "ToolBashConfig",
]

DESCRIPTION = (
    "Run a shell command with `bash -c` and return what it printed. Every call starts a "
    "fresh shell: nothing (directory, variables) carries over to the next call, so pass "
    "`workdir` rather than running `cd`. Standard input is empty, so a command that waits "
    "for input ends at its timeout. The result is stdout, then `[stderr]` followed by "
    "what went to standard error, or `(no output)`. A command that exits non-zero ends "
    "with `[exit code: N]`, one killed by a signal with `[killed by signal: NAME]`, one "
    "stopped at its timeout with `[timed out after Nms]`. Very long output keeps its end "
    "and names a file holding all of it."
)
BACKGROUND_SENTENCE = (
    " Set `run_in_background` to start a long-running command (a server, a watcher, a "
    "long build) as a job and get its id at once; no timeout applies to it, and the job "
    "tools read its output or stop it."
)
NO_BACKGROUND_SENTENCE = (
    " Background jobs are not available here: every command must finish within its timeout."
)
GUIDANCE = (
    "Shell commands: check the end of every bash result for `[exit code: N]`, "
    "`[killed by signal: …]` or `[timed out after …]` before relying on its output, and "
    "read the error text before trying again. Prefer one clear command per call over long "
    "chains whose failures hide each other."
)

#: The most characters of a command an approval question shows.
TITLE_CHARS = 120


# The argument models carry no docstring: pydantic would show it to the model.


class BashArgs(BaseModel):
    # The arguments of ``bash`` where background jobs are not offered (both variants
    # show the same title).
    model_config = ConfigDict(extra="forbid", title="BashArgs")

    command: str = Field(description="The command line, run as `bash -c <command>`.")
    description: str | None = Field(
        default=None,
        description="What the command does in 5-10 words, shown to the user.",
    )
    timeout_ms: int | None = Field(
        default=None,
        description=(
            "Stop the command after this many milliseconds (the deployment sets the "
            "default and the maximum)."
        ),
    )
    workdir: str | None = Field(
        default=None,
        description=(
            "The directory to run in; a relative path is taken from the session's working "
            "directory (default: that directory)."
        ),
    )
    # Accepted (to answer them clearly), never shown: see BackgroundBashArgs and
    # SandboxedBashArgs.
    run_in_background: SkipJsonSchema[bool] = False
    unsandboxed: SkipJsonSchema[bool] = False


class BackgroundBashArgs(BashArgs):
    # The arguments of ``bash`` where background jobs are offered.
    run_in_background: bool = Field(
        default=False,
        description="Start the command as a background job and return its id at once.",
    )


UNSANDBOXED = Field(
    default=False,
    description=(
        "Run the command outside the sandbox; the user is asked to allow it first. Only "
        "for a command that failed because of the sandbox and must run."
    ),
)


class SandboxedBashArgs(BashArgs):
    # The arguments of ``bash`` in a sandbox, without background jobs.
    unsandboxed: bool = UNSANDBOXED


class SandboxedBackgroundBashArgs(BackgroundBashArgs):
    # The arguments of ``bash`` in a sandbox, with background jobs.
    unsandboxed: bool = UNSANDBOXED


class ToolBashConfig(BaseModel):
    """Config of ``tool-bash``."""

    model_config = ConfigDict(extra="forbid")

    #: Offer ``run_in_background`` (when the ``jobs`` service is loaded too).
    enable_run_in_background: bool = True
    #: Ask about sandboxed commands too under the approval policy ``ask`` (by default
    #: only commands run without a sandbox are asked about).
    ask_sandboxed: bool = False


class ToolBash(Plugin):
    """Registers the ``bash`` tool and the ``tool:bash`` section (order 105).

    The tool runs through the ``bash`` seam; with the ``jobs`` service present (and
    ``enable_run_in_background``) it offers ``run_in_background``, and the plugin
    restarts when that service comes or goes so the schema follows. When the
    executor sandboxes its commands (ctx key ``bash_sandbox``, also followed) it offers
    ``unsandboxed`` and its guidance says what the sandbox allows. When the
    ``approval`` service is present, a command is asked about before it runs: every
    command without a sandbox, one leaving it always (even under ``policy: allow``),
    a sandboxed one unless the policy is ``ask`` (then only with ``ask_sandboxed``).
    """

    name = "tool-bash"
    Config = ToolBashConfig
    inject = ("tools", "bash", "system_prompt")
    optional = ("jobs", "bash_sandbox")

    def __init__(self, ctx: Context, config: ToolBashConfig) -> None:
        super().__init__(ctx, config)
        self.background = config.enable_run_in_background and ctx.get("jobs") is not None
        #: What the executor's sandbox allows (None: commands run unconfined).
        self.sandbox: BashSandbox | None = ctx.get("bash_sandbox")

    def setup(self) -> Iterator[Disposer]:
        sandbox = self.sandbox
        parameters = _PARAMETERS[self.background, sandbox is not None]
        sentence = BACKGROUND_SENTENCE if self.background else NO_BACKGROUND_SENTENCE
        guidance = GUIDANCE if sandbox is None else f"{GUIDANCE} {sandbox_guidance(sandbox)}"
        yield self.ctx.system_prompt.section(
            PromptSection(name="tool:bash", order=105, text=guidance)
        )
        yield self.ctx.tools.register(
            Tool(
                name="bash",
                description=DESCRIPTION + sentence,
                parameters=parameters,
                execute=self.execute,
            )
        )

    async def execute(self, args: BashArgs, call: ToolCall) -> str:
        """Run ``args.command`` (see the tool's description); errors raise."""
        timeout = args.timeout_ms
        if timeout is not None and timeout <= 0:
            raise ToolArgumentsError(
                f"invalid timeout_ms: expected a positive number of milliseconds, got {timeout}"
            )
        if args.unsandboxed and self.sandbox is None:
            raise ToolArgumentsError(
                "unsandboxed is unavailable: commands here do not run in a sandbox "
                "(bash-local sandbox: off)"
            )
        agent = call.agent
        request = BashRequest(
            command=args.command,
            cwd=_workdir(agent, args.workdir),
            timeout_ms=timeout,
            session_id=None if agent is None else agent.session.id,
            session_cwd=None if agent is None else agent.cwd,
            unsandboxed=args.unsandboxed,
        )
        bash = self.ctx.bash
        bash.check(request)
        jobs = self._jobs() if args.run_in_background else None
        await self._approve(args, call)
        if jobs is not None:
            job = await jobs.start(request, agent=agent)
            return f"started background job {job.id}"
        return render_result(await bash.run(request))

    async def _approve(self, args: BashArgs, call: ToolCall) -> None:
        """Ask the ``approval`` service about the command when it should be asked;
        raises ``ApprovalDeniedError`` when declined. A command leaving the sandbox
        is always asked about, and refused without that service."""
        approval = self.ctx.get("approval")
        title = _title(args.command)
        if args.unsandboxed:
            if approval is None:
                raise ToolArgumentsError(
                    "unsandboxed commands need a person to allow them: load the approval "
                    "plugin (none is loaded here)"
                )
            title = f"unsandboxed {title}"
        elif approval is None or (
            self.sandbox is not None and approval.policy == "ask" and not self.config.ask_sandboxed
        ):
            return
        await approval.require(
            ApprovalRequest(
                kind="bash",
                title=title,
                detail=args.command,
                call=call,
                always_ask=args.unsandboxed,
            )
        )

    def _jobs(self) -> Any:
        if not self.config.enable_run_in_background:
            raise ToolArgumentsError(
                "run_in_background is disabled for this deployment "
                "(tool-bash config enable_run_in_background: false)"
            )
        jobs = self.ctx.get("jobs") if self.background else None
        if jobs is None:
            raise ToolArgumentsError(
                "run_in_background is unavailable: load the jobs plugin (and tool-jobs)"
            )
        return jobs


#: The parameters of ``bash`` by (background jobs offered, sandboxed).
_PARAMETERS: dict[tuple[bool, bool], type[BashArgs]] = {
    (False, False): BashArgs,
    (True, False): BackgroundBashArgs,
    (False, True): SandboxedBashArgs,
    (True, True): SandboxedBackgroundBashArgs,
}


def _workdir(agent: Any, workdir: str | None) -> str | None:
    """The command's directory: ``workdir`` taken from the session's cwd (else the
    process's); None for the session's (or process's) own."""
    base: str | None = None if agent is None else agent.cwd
    if not workdir:
        return base
    return os.path.join(base or os.getcwd(), workdir)


def _title(command: str) -> str:
    """What an approval question names: the command's first line, cut short."""
    lines = command.strip().splitlines()
    text = lines[0]
    if len(lines) > 1 or len(text) > TITLE_CHARS:
        text = text[: TITLE_CHARS - 1] + "…"
    return f"bash: {text}"
