"""A real Ctrl-C (SIGINT) to ``dsh run`` in a subprocess, while the model is busy."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from dsh.testing import write_deployment

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

TIMEOUT = 60.0  # overall budget per wait: fails the test instead of hanging it

#: A model that streams one word, then waits until its turn is cancelled.
HANGING_MODEL = """
from collections.abc import AsyncIterator

import anyio

from dsh_llm import BlockStart, Chunk, LlmRequest, TextDelta

inject = ["llm"]


class Hanging:
    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        yield BlockStart(0, "text")
        yield TextDelta(0, f"working on {request.messages[-1].text}")
        await anyio.sleep_forever()


def apply(ctx, config):
    ctx.llm.register_adapter(["hanging"], Hanging())
"""


class Chat:
    """``python -m dsh run`` on a pipe; its output is collected as it arrives."""

    def __init__(self, deployment: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dsh", "run", str(deployment)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.seen = {"out": "", "err": ""}
        self.chars: queue.Queue[tuple[str, str]] = queue.Queue()
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self.pumps = [
            threading.Thread(target=self._pump, args=(name, stream), daemon=True)
            for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr))
        ]
        for pump in self.pumps:
            pump.start()

    def _pump(self, name: str, stream: IO[str]) -> None:
        while char := stream.read(1):
            self.chars.put((name, char))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def until(self, name: str, text: str) -> None:
        """Read output until ``text`` has appeared on ``name`` ("out" or "err")."""
        deadline = time.monotonic() + TIMEOUT
        while text not in self.seen[name]:
            try:
                stream, char = self.chars.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no {text!r} on std{name} in {TIMEOUT}s; got {self.seen}")
            self.seen[stream] += char

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(TIMEOUT)
        for pump in self.pumps:  # they end at the pipes' end of file
            pump.join(TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            assert stream is not None
            stream.close()


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Chat]:
    (tmp_path / "hanging_model.py").write_text(HANGING_MODEL)
    deployment = write_deployment(
        tmp_path,
        """\
        - {id: model, name: ./hanging_model.py}
        - {id: core, name: agent-core, config: {model: hanging}}
        """,
    )
    running = Chat(deployment)
    try:
        yield running
    finally:
        running.close()


def abort_a_turn(chat: Chat, word: str) -> None:
    chat.send(word)
    chat.until("out", f"working on {word}")
    chat.proc.send_signal(signal.SIGINT)
    chat.until("err", "[aborted] the turn was cancelled (user)\n")
    assert chat.proc.poll() is None  # the REPL goes on


def test_ctrl_c_aborts_the_turn_and_a_second_one_quits(chat: Chat) -> None:
    abort_a_turn(chat, "one")
    chat.until("out", "working on one\n")  # the answer's line was ended (another pipe)
    assert chat.seen["out"] == "working on one\n"
    chat.proc.send_signal(signal.SIGINT)
    assert chat.proc.wait(TIMEOUT) == 130


def test_after_ctrl_c_the_chat_goes_on_until_end_of_input(chat: Chat) -> None:
    abort_a_turn(chat, "one")
    abort_a_turn(chat, "two")  # a typed line resets the count: this Ctrl-C only cancels
    assert chat.proc.stdin is not None
    chat.proc.stdin.close()
    assert chat.proc.wait(TIMEOUT) == 0
