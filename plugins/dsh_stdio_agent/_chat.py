"""One ``run`` of the ``stdio-agent`` front-end on plain streams: the conversation
(turns, Ctrl-C, approvals, slash commands) and its rendering as lines on stdout and
stderr. :class:`._terminal.TerminalChat` extends it for the terminal chat."""

from __future__ import annotations

import functools
import io
import json
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

import anyio
from anyio.abc import TaskStatus

from dsh_agent import Agent
from dsh_approval import ALWAYS
from dsh_session import Session, SessionEvent
from dsh_slash_commands import SlashCommand

from ._commands import help_lines
from ._report import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    checklist,
    compact,
    describe_end,
    exit_status,
)
from ._stdin import read_stdin_key, read_stdin_line

if TYPE_CHECKING:
    from ._service import StdioAgent, StdioAgentConfig

__all__ = ["HELP_INTRO", "HELP_KEYS", "Chat"]

#: The first line of ``/help``; the registered commands follow it.
HELP_INTRO = "Type a message and press Enter to send it to the agent. Commands:"
#: What the line REPL's ``/help`` ends with.
HELP_KEYS = "Ctrl-C cancels the running turn; a second Ctrl-C in a row quits.\n"


class Chat:
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
        self.set_up()

    def set_up(self) -> None:
        """What a subclass adds once the conversation's state is there (nothing here)."""

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
        """The ``session/event`` listener: :meth:`on_event` for the agent's session,
        :meth:`on_child_event` for its subagents' ones, except that stdout's reader
        going away (``dsh run | head``) ends the run instead of failing the turn."""
        if self.pipe_closed:
            return
        try:
            if session is self.agent.session:
                self.on_event(event)
            else:
                depth = self.depth_of(session)
                if depth:
                    self.on_child_event(session, event, depth)
        except BrokenPipeError:
            self.pipe_closed = True
            if self.open is self.out:
                self.open = None
            self.out = io.StringIO()  # what is left to write goes nowhere
            self.agent.cancel()
            self.scope.cancel()

    def on_event(self, event: SessionEvent) -> None:
        """An event of the agent's own session."""
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
            self.note(f"[tool] {data['name']} {compact(data['arguments'], limit)}")
        elif kind == "tool/result":
            content = compact(data["content"], limit)
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
            self.note(f"{indent}{who} [tool] {data['name']} {compact(data['arguments'], limit)}")
        elif event.type == "assistant/message" and not data.get("interrupted"):
            blocks = data["message"]["content"]
            text = "".join(b["text"] for b in blocks if b.get("type") == "text")
            if text.strip():
                self.note(f"{indent}{who} {compact(text, limit)}")

    # -- approvals ------------------------------------------------------------------------

    async def answer(self, request: Any) -> bool | str:
        """The approval responder: one question at a time. A one-shot run declines
        (``assume_yes`` allows); the REPL asks ``Allow <title>? [y/N]`` and takes
        ``y`` as yes, anything else (Ctrl-C, Enter, the end of input) as no. When the
        approval service remembers "always" answers (``dsh_permissions``), it asks
        ``[y/N/a]`` and ``a`` answers ``"always"``."""
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
            approval = self.owner.home_ctx.get("approval")
            always = approval is not None and approval.remembers
            key = await self.ask(f"Allow {title}? {'[y/N/a]' if always else '[y/N]'} ")
            first = key.strip()[:1].lower()
            if always and first == "a":
                self.stream(self.err, "a\n")
                return ALWAYS
            yes = first == "y"
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
        # The front-end is done with the session: session/end listeners hear it now,
        # before the deployment unloads them (an agent not made by the loop has none).
        end_session = getattr(self.agent, "end_session", None)
        if end_session is not None:
            with anyio.CancelScope(shield=True):
                await end_session()
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
            if await self.take(line):
                return self.worst

    async def take(self, line: str) -> bool:
        """One line the user typed: a ``/command``, a message, or nothing (blank);
        True means quit (``/exit``)."""
        self.interrupts = 0
        text = line.strip()
        if not text:
            return False
        if text.startswith("/"):
            return await self.command(text)
        await self.user_turn(text)
        return False

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
