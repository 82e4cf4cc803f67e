"""The ``StdioAgent`` front-end service: a terminal chat with one agent."""

from __future__ import annotations

import functools
import io
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TextIO

import anyio
from anyio.abc import TaskStatus
from pydantic import BaseModel, ConfigDict, Field

from dsh import Context, Disposer, DshError, Service
from dsh_agent import Agent
from dsh_session import Session, SessionEvent
from dsh_slash_commands import SlashCommand

from ._commands import help_lines, terminal_commands
from ._stdin import read_stdin_key, read_stdin_line

if TYPE_CHECKING:
    from rich.console import Console

    from dsh import CheckReport

__all__ = [
    "CHECKS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "OUTPUTS",
    "StdioAgent",
    "StdioAgentConfig",
    "StdioAgentError",
    "checklist",
    "exit_status",
]

#: The turn completed (or stopped at the token limit); the REPL ended with ``/exit``
#: or at end of input.
EXIT_OK = 0
#: The turn failed (``error``, ``blocked``, or it never ran); no agent to talk to.
EXIT_FAILED = 1
#: Ctrl-C: the one-shot turn was cancelled (``aborted``), or Ctrl-C twice in a row.
EXIT_INTERRUPTED = 130

#: What ``run(output=...)`` accepts: the answer as text, or the turn's session events
#: as JSON lines.
OUTPUTS = ("text", "json")

#: The first line of ``/help``; the registered commands follow it.
HELP_INTRO = "Type a message and press Enter to send it to the agent. Commands:"
#: What the line REPL's ``/help`` ends with.
HELP_KEYS = "Ctrl-C cancels the running turn; a second Ctrl-C in a row quits.\n"


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


def exit_status(reason: Mapping[str, Any] | None) -> int:
    """The exit status of a one-shot run whose turn ended with ``reason``.

    ``completed`` and ``max-tokens`` are success (the answer was written; a truncated
    one is flagged on stderr); ``aborted`` is :data:`EXIT_INTERRUPTED`; ``error``,
    ``blocked``, any other kind and a turn that never ran (``None``) are
    :data:`EXIT_FAILED`.
    """
    kind = None if reason is None else reason.get("kind")
    if kind in ("completed", "max-tokens"):
        return EXIT_OK
    if kind == "aborted":
        return EXIT_INTERRUPTED
    return EXIT_FAILED


#: The turn-limit codes of a ``turn/end`` reason, and the config key of each limit.
_LIMITS = {"MAX_STEPS": "max_steps", "USAGE_LIMIT": "max_turn_tokens"}


def describe_end(reason: Mapping[str, Any]) -> str | None:
    """The stderr line reporting a turn end, or None for ``completed``."""
    kind = reason.get("kind")
    message = reason.get("message")
    if kind == "completed":
        return None
    if kind == "aborted":
        return f"[aborted] the turn was cancelled ({reason.get('reason', 'user')})"
    if kind == "error":
        code = reason.get("code")
        limit = _LIMITS.get(str(code))
        hint = f"; the agent config's {limit} sets it" if limit else ""
        return f"[error] {message} (code {code}{hint})"
    if kind == "blocked":
        return f"[blocked] {message}"
    if kind == "max-tokens":
        return "[max-tokens] the answer stopped at the model's token limit"
    return f"[{kind}] {message or 'the turn ended'}"


#: How a checklist line marks a task's status.
CHECKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


def checklist(todos: list[Mapping[str, Any]]) -> str:
    """The lines a ``todo/write`` list is shown as: a ``[todo]`` header, then one
    ``[x]``/``[>]``/``[ ]`` line per task."""
    if not todos:
        return "[todo] (empty list)"
    done = sum(todo["status"] == "completed" for todo in todos)
    lines = [f"[todo] {done}/{len(todos)} completed"]
    lines.extend(f"  {CHECKS.get(todo['status'], '[?]')} {todo['content']}" for todo in todos)
    return "\n".join(lines)


def _compact(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


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
        self._chat: _Chat | None = None

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

    def running_chat(self) -> _Chat:
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
        chat_type = _Chat
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


class _Chat:
    """One ``run``: the conversation's state and its rendering."""

    def __init__(
        self,
        owner: StdioAgent,
        agent: Agent,
        out: TextIO,
        err: TextIO,
        *,
        interactive: bool,
        one_shot: bool,
        assume_yes: bool = False,
    ) -> None:
        self.owner = owner
        self.config: StdioAgentConfig = owner.config
        self.agent = agent
        self.out = out
        self.err = err
        self.interactive = interactive
        self.one_shot = one_shot
        self.assume_yes = assume_yes
        self.asking = anyio.Lock()
        self.todos: list[Any] | None = None  # the checklist shown last
        self.busy = False
        self.interrupts = 0
        self.scope = anyio.CancelScope()
        self.open: TextIO | None = None  # the stream whose last line is unfinished
        self.json_lines = False  # stdout gets the session events as JSON lines
        self.show_session = False  # end with `session: <id>` on stderr (no terminal REPL)
        self.worst = EXIT_OK  # EXIT_FAILED once a turn failed (no terminal REPL)
        self.pipe_closed = False  # stdout's reader went away
        self.quitting = False  # /exit ran

    # -- output ---------------------------------------------------------------------------

    def end_line(self) -> None:
        if self.open is not None:
            self.open.write("\n")
            self.open.flush()
            self.open = None

    def stream(self, target: TextIO, text: str) -> None:
        """Write streamed text; a line left open on the other stream is ended first."""
        if self.open is not target:
            self.end_line()
        target.write(text)
        target.flush()
        self.open = None if text.endswith("\n") else target

    def say(self, text: str) -> None:
        """Whole lines to stdout."""
        self.end_line()
        self.out.write(text)
        self.out.flush()

    def note(self, line: str) -> None:
        """One line to stderr."""
        self.end_line()
        self.err.write(line + "\n")
        self.err.flush()

    def warn(self, line: str) -> None:
        """A command's refusal: one line to stderr."""
        self.note(line)

    def reply(self, text: str) -> None:
        """What a slash command shows the user: whole lines on stdout."""
        self.say(text if text.endswith("\n") else text + "\n")

    def help_text(self, commands: list[SlashCommand]) -> str:
        """``/help``: the registered ``commands``, then the keys."""
        return "\n".join([HELP_INTRO, *help_lines(commands), self.help_keys()])

    def help_keys(self) -> str:
        return HELP_KEYS

    def switch(self, agent: Agent) -> None:
        """Talk to ``agent`` from now on (``/clear``, ``/model``)."""
        self.agent = agent
        self.todos = None

    def show_prompt(self) -> None:
        self.stream(self.out, self.config.prompt)

    def on_session_event(self, session: Session, event: SessionEvent) -> None:
        """The ``session/event`` listener: :meth:`on_event`, except that stdout's reader
        going away (``dsh run | head``) ends the run instead of failing the turn."""
        if self.pipe_closed:
            return
        try:
            self.on_event(session, event)
        except BrokenPipeError:
            self.pipe_closed = True
            if self.open is self.out:
                self.open = None
            self.out = io.StringIO()  # what is left to write goes nowhere
            self.agent.cancel()
            self.scope.cancel()

    def on_event(self, session: Session, event: SessionEvent) -> None:
        if session is not self.agent.session:
            depth = self.depth_of(session)
            if depth:
                self.on_child_event(session, event, depth)
            return
        data = event.data
        kind = event.type
        limit = self.config.preview_chars
        if self.json_lines:
            self.say(json.dumps(event.to_json(), ensure_ascii=False) + "\n")
        if kind == "assistant/chunk":
            chunk = data["chunk"]
            if chunk["type"] == "text-delta" and not self.json_lines:
                self.stream(self.out, chunk["text"])
            elif chunk["type"] == "reasoning-delta" and self.config.show_reasoning:
                self.stream(self.err, chunk["text"])
        elif kind == "tool/call":
            self.note(f"[tool] {data['name']} {_compact(data['arguments'], limit)}")
        elif kind == "tool/result":
            content = _compact(data["content"], limit)
            if data["is_error"]:
                self.note(f"[tool] {data['name']} failed ({data.get('code')}): {content}")
            else:
                self.note(f"[tool] {data['name']} -> {content}")
        elif kind == "turn/end":
            line = describe_end(data["reason"])
            if line is not None:
                self.note(line)
        elif kind == "todo/write" and data["todos"] != self.todos:
            self.todos = data["todos"]
            self.note(checklist(data["todos"]))

    def depth_of(self, session: Session) -> int:
        """How many delegations below the agent's session ``session`` is (0: not one
        of its subagents)."""
        depth = 0
        store = self.owner.home_ctx.sessions
        current: Session | None = session
        while current is not None and current is not self.agent.session:
            parent = current.header.meta.get("parent_session")
            current = store.get(parent) if isinstance(parent, str) else None
            depth += 1
        return depth if current is not None else 0

    def on_child_event(self, session: Session, event: SessionEvent, depth: int) -> None:
        """A subagent's activity, indented under the tool call that started it: its
        tool calls and its final text (not its streamed deltas)."""
        data = event.data
        indent = "  " * depth
        who = f"[{session.header.meta.get('agent', '?')}]"
        limit = self.config.preview_chars
        if event.type == "tool/call":
            self.note(f"{indent}{who} [tool] {data['name']} {_compact(data['arguments'], limit)}")
        elif event.type == "assistant/message" and not data.get("interrupted"):
            blocks = data["message"]["content"]
            text = "".join(b["text"] for b in blocks if b.get("type") == "text")
            if text.strip():
                self.note(f"{indent}{who} {_compact(text, limit)}")

    # -- approvals ------------------------------------------------------------------------

    async def answer(self, request: Any) -> bool:
        """The approval responder: one question at a time. A one-shot run declines
        (``assume_yes`` allows); the REPL asks ``Allow <title>? [y/N]`` and takes
        ``y`` as yes, anything else (Ctrl-C, Enter, the end of input) as no."""
        async with self.asking:
            title = request.title
            if self.assume_yes:
                self.note(f"[approval] allowed (--yes): {title}")
                return True
            if self.one_shot:
                self.note(
                    f"[approval] declined: {title} (a one-shot run asks nobody; "
                    "dsh run --yes allows every action)"
                )
                return False
            key = await self.ask(f"Allow {title}? [y/N] ")
            yes = key.strip()[:1] in ("y", "Y")
            self.stream(self.err, "y\n" if yes else "n\n")
            return yes

    async def ask(self, question: str) -> str:
        """Show ``question`` on stderr and return the answer: the injected
        ``read_key``'s, one key from the terminal, or the next line of input."""
        owner = self.owner
        show = functools.partial(self.stream, self.err, question)
        if owner.read_key is None and self.interactive and owner.read_line is read_stdin_line:
            return await read_stdin_key(ready=show)
        show()
        read = owner.read_line if owner.read_key is None else owner.read_key
        return await read()

    # -- control --------------------------------------------------------------------------

    def interrupt(self) -> None:
        self.interrupts += 1
        if self.busy and self.interrupts == 1:
            self.agent.cancel()
            return
        if self.one_shot or self.interrupts > 1:
            self.agent.cancel()
            self.scope.cancel()
            return
        self.note("(press Ctrl-C again to quit, or type /exit)")
        if self.interactive:
            self.show_prompt()

    async def _watch_signals(self, *, task_status: TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                self.owner.interrupt()

    async def run(self, prompt: str | None) -> int:
        status = EXIT_INTERRUPTED
        async with anyio.create_task_group() as tg:
            await tg.start(self._watch_signals)
            home = self.owner.home_ctx
            stop = home.on("session/event", self.on_session_event)
            approval = home.get("approval")
            unanswer = None if approval is None else approval.set_responder(self.answer)
            try:
                with self.scope:
                    if prompt is not None:
                        status = exit_status(await self.turn(prompt))
                    else:
                        status = await self.repl()
            finally:
                stop()
                if unanswer is not None:
                    unanswer()
                self.end_line()
                tg.cancel_scope.cancel()
        if self.pipe_closed:
            raise BrokenPipeError("stdout's reader went away")
        session = self.agent.session
        if self.show_session and session.events and not (self.interactive and prompt is None):
            self.note(f"session: {session.id}")
        # Records a backend could not store (a write failed and no retry succeeded):
        # the run says so last and fails, whatever its turns did.
        for unsaved in self.owner.home_ctx.sessions.flush(session):
            self.note(f"[lost] {unsaved}")
            status = status or EXIT_FAILED
        return status

    async def turn(self, text: str) -> Mapping[str, Any] | None:
        """Send ``text`` as its own turn and wait until the agent is idle again;
        returns how that turn ended (None when it never ran)."""
        agent = self.agent
        await agent.when_idle()
        number = agent.session.last_turn() + 1
        self.busy = True
        try:
            agent.send(text)
            await agent.when_idle()
        finally:
            self.busy = False
        self.end_line()
        reason = agent.session.turn_end(number)
        if reason is None:
            self.note("[not run] the agent went idle without running the message")
        return reason

    async def repl(self) -> int:
        if self.interactive:
            agent = self.agent
            self.note(
                f'dsh: talking to agent "{agent.id}" ({agent.model}). '
                "/help lists the commands; Ctrl-C cancels a turn; Ctrl-D quits."
            )
        while True:
            if self.interactive:
                self.show_prompt()
            line = await self.owner.read_line()
            if not line:
                return self.worst
            # The line was typed (ending the prompt's line on a terminal): a new row.
            self.open = None
            self.interrupts = 0
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if await self.command(text):
                    return self.worst
                continue
            await self.user_turn(text)

    async def user_turn(self, text: str) -> None:
        """A message of the user's (typed, or sent by a slash command) as one turn."""
        reason = await self.turn(text)
        # Piped input: a script reads the exit status. A turn cancelled by Ctrl-C
        # is the user's choice, not a failure.
        if not self.interactive and exit_status(reason) == EXIT_FAILED:
            self.worst = EXIT_FAILED

    async def command(self, text: str) -> bool:
        """Run a ``/command`` through the ``slash_commands`` registry (one that is not
        registered is reported on stderr); True means quit (``/exit``)."""
        ran = await self.owner.home_ctx.slash_commands.dispatch(
            text,
            agent=self.agent,
            reply=self.reply,
            send=self.user_turn,
            frontend="terminal",
            switch=self.switch,
        )
        if not ran:
            self.note(f"unknown command {text.split(maxsplit=1)[0]}; /help lists the commands")
        return self.quitting
