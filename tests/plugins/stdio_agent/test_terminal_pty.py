"""``dsh run`` on a real terminal, driven the way a person types: the pty is the
process's controlling terminal, the keys are the bytes a terminal sends, and the test
reads the screen (a terminal emulator) and what the model received."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.plugins.stdio_agent.terminal_support import (
    Terminal,
    pty_deployment,
    received,
)
from tests.support import ROOT

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX terminals")

LEFT, UP = b"\x1b[D", b"\x1b[A"
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Terminal]:
    path = pty_deployment(tmp_path)
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    running = Terminal(["-m", "dsh", "run", str(path)], tmp_path, state)
    try:
        yield running
    finally:
        running.close()


def test_arrows_edit_the_line_and_the_up_arrow_recalls_it(term: Terminal, tmp_path: Path) -> None:
    term.at_prompt(1)
    term.type(b"helo" + LEFT + b"l\r")  # a typo, mended in place
    term.shows("reply 1: hello")
    term.at_prompt(2)
    term.type(UP)
    term.until(lambda t: t.lines()[-1] == "> hello", "the recalled line")
    term.type(b"\r")
    term.shows("reply 2: hello")
    term.at_prompt(3)
    term.type(b"\x04")  # Ctrl-D
    assert term.wait() == 0
    assert received(tmp_path) == ["hello", "hello"]
    assert "+hello" in (tmp_path / "state" / "dsh" / "history").read_text()
    assert "\x1b" not in "".join(received(tmp_path))


def test_a_pasted_question_is_one_message_and_alt_enter_starts_a_line(
    term: Terminal, tmp_path: Path
) -> None:
    term.at_prompt(1)
    term.type(PASTE_START + b"line one\nline two\nline three" + PASTE_END)
    term.until(lambda t: t.lines()[-3:] == ["> line one", ". line two", ". line three"], "paste")
    term.type(b"\r")
    term.shows("reply 1: line one / line two / line three")
    term.at_prompt(2)
    term.type(b"first\x1b\rsecond\r")  # Alt+Enter is Esc, Enter
    term.shows("reply 2: first / second")
    term.at_prompt(3)
    term.type(b"/exit\r")
    assert term.wait() == 0
    assert received(tmp_path) == ["line one\nline two\nline three", "first\nsecond"]


def test_ctrl_c_cancels_the_turn_and_the_chat_goes_on(term: Terminal, tmp_path: Path) -> None:
    term.at_prompt(1)
    term.type(b"hang\r")
    term.shows("working on it")
    term.type(b"\x03")  # the terminal sends SIGINT
    term.shows("[aborted] the turn was cancelled (user)")
    term.at_prompt(2)
    term.type(b"after\r")
    term.shows("reply 2: after")
    term.at_prompt(3)
    term.type(b"\x04")
    assert term.wait() == 0
    assert received(tmp_path) == ["hang", "after"]


def test_what_is_typed_during_a_turn_waits_for_the_next_prompt(
    term: Terminal, tmp_path: Path
) -> None:
    term.at_prompt(1)
    term.type(b"slow\r")
    term.shows("working on it")
    term.type(b"typed ahead\r")
    # The terminal takes typed keys in asynchronously: once they wait in its queue,
    # unechoed, the model goes on (and the turn's end turns echo back on).
    queued = len(b"typed ahead\n")
    term.until(lambda t: t.typed_ahead(tmp_path / "tty") == queued, "the queued keys", 0.01)
    (tmp_path / "release").write_text("go")
    term.shows("reply 2: typed ahead")
    lines = term.lines()
    answer = lines.index("working on it reply 1: slow")  # nothing typed mixed in
    assert lines[answer + 2] == "> typed ahead"
    assert received(tmp_path) == ["slow", "typed ahead"]
    term.at_prompt(3)
    term.type(b"\x04")
    assert term.wait() == 0


def test_ctrl_c_at_the_prompt_clears_the_line_then_asks_then_quits(term: Terminal) -> None:
    term.at_prompt(1)
    term.type(b"abc")
    term.until(lambda t: t.lines()[-1] == "> abc", "the typed line")
    term.type(b"\x03")
    term.until(lambda t: t.lines()[-1] == ">", "a cleared line")
    term.type(b"\x03")
    term.shows("(press Ctrl-C again to quit, or type /exit)")
    term.at_prompt(2)
    term.type(b"\x03")
    assert term.wait() == 130


def test_the_readme_chat_shows_what_the_readme_says(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- terminal-chat -->\n```console\n\$ (.*?)\n(.*?)\n```", text, re.DOTALL)
    assert found is not None, "README.md has no terminal-chat block"
    command, shown = found.group(1).split(), found.group(2).splitlines()
    assert command[0] == ".venv/bin/dsh"
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    term = Terminal(["-m", "dsh", *command[1:]], ROOT, state)
    try:
        typed = [line[2:] for line in shown if line.startswith("> ")]
        for count, line in enumerate(typed, 1):
            term.at_prompt(count)
            term.type(line.encode() + b"\r")
        assert term.wait() == 0
        lines = [re.sub(r"^↳ \d+\.\ds", "↳ 0.0s", line) for line in term.lines()]
    finally:
        term.close()
    assert lines == shown
