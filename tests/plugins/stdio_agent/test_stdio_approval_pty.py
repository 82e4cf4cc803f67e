"""The approval question in a real terminal: ``dsh run`` on a pty answers with one
keypress, and Ctrl-C at the question means no (the turn goes on)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.plugins.stdio_agent.stdio_support import shell_deployment
from tests.plugins.stdio_agent.terminal_support import Terminal

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX terminals")


def test_one_key_answers_and_ctrl_c_means_no(tmp_path: Path) -> None:
    path = shell_deployment(tmp_path)
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    term = Terminal(["-m", "dsh", "run", str(path)], tmp_path, state)
    question = "Allow bash: printf ALLOWED? [y/N]"
    try:
        term.at_prompt(1)
        term.type(b"go\r")
        term.shows(question)
        term.type(b"y")  # one key, no Enter
        term.shows("result: ALLOWED")
        assert term.lines().count(f"{question} y") == 1
        assert term.lines().count('▸ bash {"command": "printf ALLOWED"} → ALLOWED') == 1
        term.at_prompt(2)
        term.type(b"again\r")
        term.shows(question, times=2)
        term.type(b"\x03")  # Ctrl-C at the question: no
        term.shows("result: Error: the user declined: bash: printf ALLOWED")
        assert f"{question} n" in term.lines()
        declined = '✗ bash {"command": "printf ALLOWED"} failed (APPROVAL_DENIED): Error: the user'
        assert any(line.startswith(declined) for line in term.lines())
        term.at_prompt(3)
        term.type(b"/exit\r")
        assert term.wait() == 0
    finally:
        term.close()
