"""The interactive terminal chat: prompt_toolkit reads the messages (line editing,
history, multi-line input), :mod:`._view` draws the answers with rich.

``StdioAgent.run`` imports this module only when it starts an interactive chat (stdin
and stdout are terminals), so neither library is imported otherwise. prompt_toolkit's
``prompt_async`` runs on asyncio only: on another event loop ``run`` keeps the line
REPL (see ``StdioAgent.terminal``).
"""

from __future__ import annotations

import logging
import os
import sys
import termios
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console

from dsh_llm import Usage
from dsh_session import SessionEvent
from dsh_slash_commands import SlashCommands

from ._chat import Chat
from ._report import EXIT_INTERRUPTED, EXIT_OK, checklist, describe_end
from ._usage import session_usage
from ._view import View, token_line

__all__ = [
    "KEYS",
    "SlashCompleter",
    "TerminalChat",
    "discard_typeahead",
    "held_input",
    "session_usage",
]

#: What the terminal chat's ``/help`` ends with (after the registered commands).
KEYS = """\
Keys:
  Enter            send
  Alt+Enter        a new line (or Esc, then Enter); a paste stays one message
  Up, Down         earlier messages (kept across chats)
  Tab              complete a /command
  Ctrl-C           cancel the running turn; at the prompt, clear the line; on an
                   empty line twice, quit
  Ctrl-D           quit
What you type while the agent answers waits for the next prompt.
"""

#: How often the spinner moves while a turn runs, in seconds.
FRAME = 0.08


class _CtrlC(Exception):
    """Ctrl-C on an empty line (ends the prompt)."""


@contextmanager
def held_input() -> Iterator[None]:
    """While a turn runs: what is typed is not echoed, so it never lands inside the
    answer. The terminal keeps it (with Ctrl-C still a signal) and the next prompt
    reads it as typed. Nothing happens when stdin is not a terminal."""
    stdin = sys.stdin
    try:
        fd = stdin.fileno()
        saved = termios.tcgetattr(fd)
    except (AttributeError, OSError, ValueError, termios.error):
        yield
        return
    quiet = list(saved)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


def discard_typeahead() -> None:
    """Drop what was typed and not read yet (before a question is asked: a key typed
    earlier must not answer it). Nothing happens when stdin is not a terminal."""
    with suppress(AttributeError, OSError, ValueError, termios.error):  # no terminal
        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)


class _ToView(logging.Handler):
    """Shows the ``dsh`` log in the chat: a record with a ``dsh_status`` (a retry) as
    the spinner's status line, others at the level the command line asked for as a
    line of their own."""

    def __init__(self, view: View, threshold: int, formatter: logging.Formatter) -> None:
        super().__init__(logging.DEBUG)
        self.view = view
        self.threshold = threshold
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        status = getattr(record, "dsh_status", None)
        if isinstance(status, str):
            self.view.status(status)
        elif record.levelno >= self.threshold:
            self.view.log(self.format(record))


@contextmanager
def _logs_to(view: View) -> Iterator[None]:
    """Route the ``dsh`` logger to ``view`` meanwhile (its handlers would write over
    the live region), then put everything back."""
    logger = logging.getLogger("dsh")
    handlers, level, propagate = logger.handlers[:], logger.level, logger.propagate
    threshold = logger.getEffectiveLevel()
    formats = [h.formatter for h in handlers if h.formatter is not None]
    formatter = formats[0] if formats else logging.Formatter("%(levelname)s %(name)s: %(message)s")
    logger.handlers[:] = [_ToView(view, threshold, formatter)]
    logger.propagate = False
    logger.setLevel(min(threshold, logging.INFO))
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def _history(path: str | None, view: View) -> History:
    if path is None:
        return InMemoryHistory()
    file = Path(path).expanduser()
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.touch(mode=0o600)  # like a shell's history: what was typed is private
    except OSError as exc:
        view.note(f"[history] {file}: {exc}; only this chat's messages can be recalled")
        return InMemoryHistory()
    return FileHistory(str(file))


def _ctrl_c(app: Application[Any]) -> None:
    """Ctrl-C at the prompt: clear the line, or end the prompt when it is empty."""
    buffer = app.current_buffer
    if buffer.text:
        buffer.reset()
    else:
        app.exit(exception=_CtrlC())


def _keys() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        _ctrl_c(event.app)

    return keys


class SlashCompleter(Completer):
    """Tab completion of ``/name`` at the start of the line, from ``registry``: what
    is registered when Tab is pressed, each with its argument hint and description."""

    def __init__(self, registry: SlashCommands) -> None:
        self.registry = registry

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or any(c.isspace() for c in typed):
            return
        for command in self.registry.list():
            name = f"/{command.name}"
            if name.startswith(typed):
                shown = f"{name} {command.argument_hint}".rstrip()
                yield Completion(
                    name,
                    start_position=-len(typed),
                    display=shown,
                    display_meta=command.description,
                )


class TerminalChat(Chat):
    """``run`` on a terminal: the line editor at the prompt, the rich view meanwhile.

    It keeps :class:`._chat.Chat`'s conversation (turns, Ctrl-C, approvals, the
    todo list, subagent activity) and replaces its input and its drawing.
    """

    def set_up(self) -> None:
        """The terminal chat is always an interactive, open-ended one; it draws on
        ``owner.console``, else on a console of its own on ``out``."""
        self.interactive = True
        self.one_shot = False
        console = self.owner.console
        if console is None:
            console = Console(file=self.out, highlight=False, markup=False, emoji=False)
        markdown = self.config.markdown and not os.environ.get("NO_COLOR")
        self.view = View(console, markdown=markdown, preview_chars=self.config.preview_chars)
        self.app: Application[Any] | None = None  # the prompt, while it shows
        self.prompts = 0  # how many prompts started (a test waits for one)
        self.calls: dict[str, str] = {}  # the arguments of each running tool call
        self.ended: int | None = None  # the number of the turn that ended last

    # -- output: everything goes through the view -------------------------------------------

    def end_line(self) -> None:
        self.view.end_line()

    def stream(self, target: TextIO, text: str) -> None:
        self.view.write(text)

    def say(self, text: str) -> None:
        self.view.say(text)

    def note(self, line: str) -> None:
        self.view.note(line)

    def warn(self, line: str) -> None:
        self.view.note(line, style="red")

    def help_keys(self) -> str:
        return KEYS

    def show_prompt(self) -> None:
        """The line editor shows the prompt."""

    def on_event(self, event: SessionEvent) -> None:
        data = event.data
        kind = event.type
        view = self.view
        if kind == "assistant/chunk":
            chunk = data["chunk"]
            if chunk["type"] == "text-delta":
                view.answer(chunk["text"])
            elif chunk["type"] == "reasoning-delta" and self.config.show_reasoning:
                view.think(chunk["text"])
        elif kind == "tool/call":
            view.call(data["call_id"], data["name"], data["arguments"])
            self.calls[data["call_id"]] = data["arguments"]
        elif kind == "tool/result":
            view.result(data, self.calls.pop(data["call_id"], ""))
        elif kind == "turn/end":
            reason = data["reason"]
            line = describe_end(reason)
            if line is not None:
                # Cancelled or cut at the token limit: the user's doing, not a failure.
                calm = reason.get("kind") in ("aborted", "max-tokens")
                view.note(line, style="yellow" if calm else "red")
            self.ended = data["turn"]
        elif kind == "todo/write" and data["todos"] != self.todos:
            self.todos = data["todos"]
            view.note(checklist(data["todos"]), style="")

    # -- approvals --------------------------------------------------------------------------

    async def answer(self, request: Any) -> bool | str:
        with self.view.paused():
            if not self.assume_yes:
                discard_typeahead()
            return await super().answer(request)

    # -- control ----------------------------------------------------------------------------

    def interrupt(self) -> None:
        app = self.app
        if app is not None and app.is_running and not app.is_done:
            _ctrl_c(app)  # a SIGINT at the prompt acts like the key
            return
        super().interrupt()

    async def run(self, prompt: str | None) -> int:
        with _logs_to(self.view):
            return await super().run(prompt)

    async def turn(self, text: str) -> Mapping[str, Any] | None:
        view = self.view
        self.calls.clear()
        self.ended = None
        view.begin()
        reason: Mapping[str, Any] | None = None
        try:
            with held_input():
                async with anyio.create_task_group() as tg:
                    # Its own scope: cancelling the group's would cancel this task too,
                    # and coverage.py loses the lines of a frame resumed that way.
                    animation = anyio.CancelScope()
                    tg.start_soon(self._animate, animation)
                    try:
                        reason = await super().turn(text)
                    finally:
                        animation.cancel()
            return reason
        finally:
            view.end(token_line(view.elapsed, self._turn_usage()))

    def _turn_usage(self) -> Usage | None:
        """The tokens of the turn that ended last (None when it did not end)."""
        ended = self.ended
        return None if ended is None else session_usage(self.agent.session, ended)

    async def _animate(self, scope: anyio.CancelScope) -> None:
        with scope:
            while True:
                await anyio.sleep(FRAME)
                self.view.tick()

    def _prompting(self) -> None:
        self.prompts += 1

    async def repl(self) -> int:
        agent = self.agent
        view = self.view
        view.note(
            f'dsh: talking to agent "{agent.id}" ({agent.model}); '
            "/help lists the commands and keys."
        )
        session: PromptSession[str] = PromptSession(
            history=_history(self.config.history_file, view),
            key_bindings=_keys(),
            completer=SlashCompleter(self.owner.home_ctx.slash_commands),
            multiline=False,
            prompt_continuation=lambda width, line, wrap: "." * (width - 1) + " ",
        )
        while True:
            view.flush_logs()
            self.app = session.app
            try:
                line = await session.prompt_async(
                    self.config.prompt,
                    handle_sigint=False,
                    set_exception_handler=False,
                    pre_run=self._prompting,
                )
            except EOFError:  # Ctrl-D on an empty line
                return EXIT_OK
            except _CtrlC:
                self.interrupts += 1
                if self.interrupts > 1:
                    self.agent.cancel()
                    return EXIT_INTERRUPTED
                view.note("(press Ctrl-C again to quit, or type /exit)")
                continue
            finally:
                self.app = None
            if await self.take(line):
                return EXIT_OK
