"""The ``StdioAgent`` front-end service: a terminal chat with one agent. It chooses the
agent, answers ``dsh check`` and registers the terminal's commands; each ``run`` is a
:class:`._chat.Chat` (or, on a terminal, a :class:`._terminal.TerminalChat`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from pydantic import BaseModel, ConfigDict, Field

from dsh import Context, Disposer, DshError, Service
from dsh_agent import Agent

from ._chat import Chat
from ._commands import terminal_commands
from ._report import EXIT_FAILED
from ._stdin import read_stdin_line

if TYPE_CHECKING:
    from rich.console import Console

    from dsh import CheckReport

__all__ = [
    "OUTPUTS",
    "StdioAgent",
    "StdioAgentConfig",
    "StdioAgentError",
    "default_history_file",
]

#: What ``run(output=...)`` accepts: the answer as text, or the turn's session events
#: as JSON lines.
OUTPUTS = ("text", "json")


def default_history_file() -> str:
    """Where the terminal chat keeps its history by default: ``dsh/history`` in
    ``$XDG_STATE_HOME``, else in ``~/.local/state``."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join("~", ".local", "state")
    return os.path.join(state, "dsh", "history")


class StdioAgentConfig(BaseModel):
    """Config of the ``stdio-agent`` front-end."""

    model_config = ConfigDict(extra="forbid")

    #: The agent to talk to when ``run`` names none (default: the only agent).
    agent: str | None = None
    #: The input prompt, shown only when standard input is a terminal.
    prompt: str = "> "
    #: Stream the model's reasoning to stderr as it arrives.
    show_reasoning: bool = False
    #: How many characters of a tool call's arguments or result one line shows.
    preview_chars: int = Field(default=120, ge=10)
    #: The terminal chat's history of sent messages (``~`` expands); None keeps none.
    history_file: str | None = Field(default_factory=default_history_file)
    #: The terminal chat renders answers as Markdown (plain text when false or when
    #: the environment sets ``NO_COLOR``).
    markdown: bool = True


def _on_asyncio() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio)
        return False
    return True


class StdioAgentError(DshError, RuntimeError):
    """The front-end cannot run as asked (no such agent, already running)."""

    code = "STDIO_AGENT"


class StdioAgent(Service):
    """Chat with an agent on stdin/stdout (ctx key ``frontend``).

    The streams are attributes so that a host (or a test) can replace them before
    ``run``: ``stdout`` and ``stderr`` (``None``: ``sys.stdout``/``sys.stderr`` at run
    time), ``read_line`` (an async callable returning the next line, ``""`` at end of
    input; default: :func:`read_stdin_line`), ``read_key`` (how an approval question
    is answered; ``None``: one keypress from the terminal when interactive, else the
    next line of ``read_line``) and ``interactive`` (show the prompt and the banner;
    ``None``: when ``read_line`` is the default and stdin is a terminal).
    """

    key = "frontend"
    name = "stdio-agent"
    Config = StdioAgentConfig
    inject = ("agents", "sessions", "system_prompt", "slash_commands")

    def __init__(self, ctx: Context, config: StdioAgentConfig) -> None:
        super().__init__(ctx, config)
        self.stdout: TextIO | None = None
        self.stderr: TextIO | None = None
        self.read_line: Callable[[], Awaitable[str]] = read_stdin_line
        self.read_key: Callable[[], Awaitable[str]] | None = None
        self.interactive: bool | None = None
        self.terminal: bool | None = None
        self.console: Console | None = None
        self._chat: Chat | None = None

    def _wants_terminal(self, out: TextIO) -> bool:
        """Whether a run without a prompt is the terminal chat (see ``terminal``)."""
        if self.terminal is not None:
            return self.terminal
        stdin = sys.stdin
        return (
            self.read_line is read_stdin_line
            and stdin is not None
            and stdin.isatty()
            and out.isatty()
            and os.environ.get("TERM") != "dumb"
            and _on_asyncio()
        )

    def select_agent(self, agent_id: str | None = None) -> Agent:
        """``agent_id``'s agent, else the configured one, else the only one.

        Raises :class:`StdioAgentError` naming the known agents when there is no such
        agent, none at all, or several and none is named.
        """
        agents = self.home_ctx.agents
        known: list[Agent] = agents.list()
        wanted = agent_id if agent_id is not None else self.config.agent
        if wanted is not None:
            agent: Agent | None = agents.get(wanted)
            if agent is None:
                raise StdioAgentError(self._unknown(wanted, configured=agent_id is None))
            return agent
        if len(known) == 1:
            return known[0]
        if not known:
            raise StdioAgentError("there is no agent to talk to (declare one in agent-core)")
        ids = ", ".join(f'"{a.id}"' for a in known)
        raise StdioAgentError(
            f"several agents are running ({ids}): name one "
            '(dsh run --agent ID, or the stdio-agent config key "agent")'
        )

    def _unknown(self, wanted: str, *, configured: bool) -> str:
        """The message for agent ``wanted``, which no live agent is: located at the
        config key when it comes from the ``agent`` key of a deployment entry."""
        ids = ", ".join(f'"{a.id}"' for a in self.home_ctx.agents.list()) or "(none)"
        if not configured:
            return f'unknown agent "{wanted}"; known agents: {ids}'
        entry = self.home_ctx.fiber.entry
        where = "" if entry is None else f"{entry.locate(('agent',))}: "
        return f'{where}stdio-agent: agent "{wanted}" is not declared; known agents: {ids}'

    def _check_served(self, model: str) -> None:
        """Refuse ``model`` when no adapter serves it, before the run records anything."""
        served: list[str] = self.home_ctx.llm.models()
        if model not in served:
            known = ", ".join(f'"{m}"' for m in served) or "(none)"
            raise StdioAgentError(f'no adapter serves model "{model}"; known models: {known}')

    def setup(self) -> Iterator[Disposer]:
        yield self.ctx.on("deployment/check", self._check)
        for command in terminal_commands(self):
            yield self.ctx.slash_commands.register(command)

    def running_chat(self) -> Chat:
        """The chat ``run`` is running (its commands act on it); raises
        :class:`StdioAgentError` when there is none."""
        if self._chat is None:
            raise StdioAgentError("the terminal's commands work only while its chat runs")
        return self._chat

    def _check(self, report: CheckReport) -> None:
        """``dsh check``: the configured ``agent`` is one of the deployment's agents."""
        wanted = self.config.agent
        if wanted is not None and self.home_ctx.agents.get(wanted) is None:
            report.fail(self._unknown(wanted, configured=True))

    def interrupt(self) -> None:
        """What Ctrl-C does; the SIGINT handler calls this and nothing else.

        While a turn runs, the first Ctrl-C cancels it (the turn ends ``aborted``). With
        nothing to cancel the REPL asks for a second one; the second Ctrl-C in a row
        (counted since the last line read) ends ``run`` with :data:`EXIT_INTERRUPTED`,
        as does any Ctrl-C of a one-shot run that is not waiting for its turn. Does
        nothing when ``run`` is not running.
        """
        if self._chat is not None:
            self._chat.interrupt()

    async def run(
        self,
        *,
        agent_id: str | None = None,
        prompt: str | None = None,
        assume_yes: bool = False,
        model: str | None = None,
        output: str = "text",
        show_session: bool = False,
    ) -> int:
        """Talk to the agent until done; returns the exit status.

        With ``prompt``: send it, stream the answer to stdout (tool calls and the
        outcome to stderr), wait until the agent is idle and return
        :func:`exit_status` of the turn. Without: a REPL reading lines until ``/exit``
        or the end of input (:data:`EXIT_OK`). :data:`EXIT_FAILED` when no agent can be
        chosen (see :meth:`select_agent`); the message goes to stderr.

        While it runs it answers the ``approval`` service's questions (when that
        service is loaded): the REPL asks ``Allow <title>? [y/N]``; a one-shot run
        declines; ``assume_yes`` allows everything without asking.

        ``model`` switches the chosen agent to that model first
        (``agents.switch_model``). ``output="json"`` writes each session event of the
        agent's turns to stdout as one JSON line (``SessionEvent.to_json``) instead of
        the answer's text; it needs a one-shot run or input that is not a terminal.
        A REPL whose input is not a terminal returns :data:`EXIT_FAILED` when any of
        its turns failed (``error``, ``blocked``, never ran). Without a terminal REPL,
        ``show_session`` prints ``session: <id>`` on stderr when the run ends (once the
        session recorded something). When
        stdout's reader goes away the turn is cancelled and ``run`` raises
        :class:`BrokenPipeError` (``dsh run`` exits 141, quietly).
        """
        if output not in OUTPUTS:
            raise StdioAgentError(f'unknown output "{output}"; choose one of: {", ".join(OUTPUTS)}')
        if self._chat is not None:
            raise StdioAgentError("this stdio-agent is already running")
        out = sys.stdout if self.stdout is None else self.stdout
        err = sys.stderr if self.stderr is None else self.stderr
        try:
            agent = self.select_agent(agent_id)
            if model is not None:
                self._check_served(model)
                agent = await self.home_ctx.agents.switch_model(agent.id, model)
        except DshError as exc:
            err.write(f"{exc}\n")
            err.flush()
            return EXIT_FAILED
        interactive = self.interactive
        if interactive is None:
            stdin = sys.stdin
            interactive = self.read_line is read_stdin_line and stdin is not None and stdin.isatty()
        if output == "json" and interactive and prompt is None:
            err.write("JSON output needs a one-shot run (-p) or input that is not a terminal\n")
            err.flush()
            return EXIT_FAILED
        chat_type = Chat
        if prompt is None and output == "text" and self._wants_terminal(out):
            from ._terminal import TerminalChat  # imports prompt_toolkit and rich

            chat_type = TerminalChat
        chat = chat_type(
            self,
            agent,
            out,
            err,
            interactive=interactive,
            one_shot=prompt is not None,
            assume_yes=assume_yes,
        )
        chat.json_lines = output == "json"
        chat.show_session = show_session
        self._chat = chat
        try:
            return await chat.run(prompt)
        finally:
            self._chat = None
