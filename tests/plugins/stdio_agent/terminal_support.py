"""Helpers of the terminal chat's tests: what a person sees (a terminal emulator reads
the output), the chat in-process on a recorded console with piped keys, and ``dsh run``
on a real pty."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import select
import struct
import sys
import termios
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyte
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from dsh.testing import Reply, write_deployment
from tests.plugins.stdio_agent.stdio_support import FrontRig, front_rig

#: Per wait, the longest a pty test waits for the screen (a guard that fails the test
#: instead of hanging it, never a way to wait for state).
TIMEOUT = 60.0

WIDTH = 80


def screen(text: str, width: int = WIDTH, rows: int = 200) -> list[str]:
    """The lines a terminal of ``width`` columns shows after ``text`` was written to it
    (the tty turns each newline into CR LF), trailing blank lines dropped."""
    display = pyte.Screen(width, rows)
    display.set_mode(pyte.modes.LNM)
    pyte.Stream(display).feed(text)
    lines = [line.rstrip() for line in display.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@dataclass
class TerminalRig:
    """The front-end (see :class:`FrontRig`) running the terminal chat: ``keys`` is
    what is typed, ``console`` records what is drawn."""

    rig: FrontRig
    keys: PipeInput
    console: Console

    @property
    def raw(self) -> str:
        """Everything written to the terminal, escape sequences included."""
        file = self.console.file
        assert isinstance(file, io.StringIO)
        return file.getvalue()

    def screen(self) -> list[str]:
        """What the terminal shows now."""
        return screen(self.raw, self.console.width, self.console.height)

    def type(self, keys: str) -> None:
        self.keys.send_text(keys)


@asynccontextmanager
async def terminal_rig(
    *replies: Reply,
    config: dict[str, Any] | None = None,
    core: dict[str, Any] | None = None,
    plugins: tuple[tuple[Any, Any], ...] = (),
    height: int = 200,
) -> AsyncIterator[TerminalRig]:
    """:func:`front_rig` with the terminal chat on: prompt_toolkit reads ``keys`` (a
    pipe) and draws nowhere, rich draws on a recorded 80-column console. No history
    file unless ``config`` names one."""
    settings = {"history_file": None, **(config or {})}
    with create_pipe_input() as keys, create_app_session(input=keys, output=DummyOutput()):
        async with front_rig(*replies, config=settings, core=core, plugins=plugins) as rig:
            console = Console(
                file=io.StringIO(),
                force_terminal=True,
                color_system="standard",
                width=WIDTH,
                height=height,
                highlight=False,
                markup=False,
                emoji=False,
            )
            rig.front.console = console
            rig.front.terminal = True
            yield TerminalRig(rig, keys, console)


# -- dsh run on a pty -------------------------------------------------------------------

#: A model for the pty tests. It records each message it receives (``received.jsonl``)
#: and answers ``reply <n>: <the message's lines joined by " / ">``; ``hang`` streams a
#: word and waits until the turn is cancelled; ``slow`` streams a word and waits until
#: someone writes to the FIFO ``release``.
PTY_MODEL = """\
import json
import os
from pathlib import Path

import anyio

from dsh_llm import BlockEnd, BlockStart, Finish, TextDelta, Usage, UsageChunk

inject = ["llm"]


class Model:
    def __init__(self):
        self.count = 0

    async def stream(self, request):
        text = request.messages[-1].text
        with open("received.jsonl", "a") as log:
            log.write(json.dumps(text) + "\\n")
        self.count += 1
        yield BlockStart(0, "text")
        if text in ("hang", "slow"):
            yield TextDelta(0, "working on it ")
            if text == "hang":
                await anyio.sleep_forever()
            await anyio.to_thread.run_sync(Path("release").read_text)
        yield TextDelta(0, f"reply {self.count}: " + " / ".join(text.splitlines()))
        yield BlockEnd(0)
        yield UsageChunk(Usage(10, 5))
        yield Finish("stop")


def apply(ctx, config):
    # Where the test finds this terminal's input queue (see Terminal.typed_ahead).
    Path("tty").write_text(os.ttyname(0))
    ctx.llm.register_adapter(["pty"], Model())
"""

PTY_DEPLOYMENT = """\
- {id: model, name: ./pty_model.py}
- {id: core, name: agent-core, config: {model: pty}}
"""


def pty_deployment(directory: Path) -> Path:
    """:data:`PTY_DEPLOYMENT` and its model, written to ``directory``, with the FIFO
    the ``slow`` answer waits on."""
    (directory / "pty_model.py").write_text(PTY_MODEL)
    os.mkfifo(directory / "release")
    return write_deployment(directory, PTY_DEPLOYMENT)


def received(directory: Path) -> list[str]:
    """The messages the model of :func:`pty_deployment` received, in order."""
    import json

    log = directory / "received.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


class Terminal:
    """A process on a pty, as a person's terminal runs it: the pty is its controlling
    terminal (Ctrl-C is SIGINT to it), it has a size, and a terminal emulator keeps
    the screen, answering the cursor position requests prompt_toolkit sends."""

    def __init__(
        self,
        argv: Sequence[str],
        cwd: Path,
        env: dict[str, str] | None = None,
        rows: int = 200,
        cols: int = 100,
    ) -> None:
        environment = {**os.environ, "TERM": "xterm-256color", **(env or {})}
        environment.pop("NO_COLOR", None)
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec at once
            try:
                os.chdir(cwd)
                os.execve(sys.executable, [sys.executable, *argv], environment)
            finally:
                os._exit(127)
        self.pid = pid
        self.fd = fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.display = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.display)
        self.raw = b""
        self.status: int | None = None

    def lines(self) -> list[str]:
        """What the screen shows, trailing blank lines dropped."""
        lines = [line.rstrip() for line in self.display.display]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def text(self) -> str:
        return "\n".join(self.lines())

    def _read(self, timeout: float) -> bool:
        """Take what the process wrote (within ``timeout``); False at its end."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the process closed the terminal
            data = b""
        if not data:
            return False
        self.raw += data
        *parts, last = data.split(b"\x1b[6n")
        for part in parts:  # a cursor position request: answer as a terminal does
            self.stream.feed(part)
            cursor = self.display.cursor
            os.write(self.fd, b"\x1b[%d;%dR" % (cursor.y + 1, cursor.x + 1))
        self.stream.feed(last)
        return True

    def until(
        self, condition: Callable[[Terminal], object], what: str, poll: float | None = None
    ) -> None:
        """Read the output until ``condition(self)`` holds. A condition that no output
        announces is checked again every ``poll`` seconds."""
        deadline = time.monotonic() + TIMEOUT
        while not condition(self):
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {what}; the screen shows:\n{self.text()}"
            alive = self._read(left if poll is None else min(poll, left))
            assert alive or condition(self), f"the process ended before {what}:\n{self.text()}"

    def typed_ahead(self, tty: Path) -> int:
        """How many typed bytes wait in the input queue of the terminal ``tty`` names
        (the process's side of this pty) for a program to read them."""
        fd = os.open(tty.read_text(), os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            queued = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        finally:
            os.close(fd)
        count: int = struct.unpack("i", queued)[0]
        return count

    def shows(self, text: str, times: int = 1) -> None:
        """Read until ``text`` is on the screen (``times`` times)."""
        self.until(lambda term: term.text().count(text) >= times, f"{text!r} ({times}x)")

    def at_prompt(self, count: int) -> None:
        """Read until the ``count``-th prompt (an empty ``>`` line last) shows."""

        def ready(term: Terminal) -> bool:
            lines = term.lines()
            prompts = [line for line in lines if line.startswith(">")]
            return len(prompts) >= count and lines[-1] == ">"

        self.until(ready, f"prompt {count}")

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait(self) -> int:
        """Read until the process ends; its exit status."""
        deadline = time.monotonic() + TIMEOUT
        while self._read(max(0.0, deadline - time.monotonic())):
            assert time.monotonic() < deadline, f"the process never ended:\n{self.text()}"
        _, status = os.waitpid(self.pid, 0)
        self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        os.close(self.fd)
