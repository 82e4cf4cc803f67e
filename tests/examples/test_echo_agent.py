"""The echo example through the real ``dsh`` command (``python -m dsh``), as a user runs it."""

from __future__ import annotations

import pytest

from tests.support import ECHO, run_dsh, without_session_line


def test_check() -> None:
    done = run_dsh("check", str(ECHO))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f'{ECHO}: ok (3 plugin entries active, prompt renders for agent "main" (1 tool))\n'
    )


def test_one_shot_answers_and_shows_the_tool_call() -> None:
    done = run_dsh("run", str(ECHO), "-p", "echo hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The echo tool returned: hello\n"
    tools = '[tool] echo {"text": "hello"}\n[tool] echo -> hello\n'
    assert without_session_line(done.stderr) == tools


def test_piped_repl() -> None:
    done = run_dsh("run", str(ECHO), stdin="echo hi\n/help\n/exit\nnot read\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("The echo tool returned: hi\nType a message and press Enter")
    assert "You said" not in done.stdout
    assert without_session_line(done.stderr) == '[tool] echo {"text": "hi"}\n[tool] echo -> hi\n'


@pytest.mark.parametrize("stdin", ["", "hello\n", "hello"])
def test_repl_exits_0_at_end_of_input(stdin: str) -> None:
    done = run_dsh("run", str(ECHO), stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("You said: hello. Try `echo <words>`.\n" if stdin else "")


def test_prompt_shows_what_the_model_gets() -> None:
    done = run_dsh("prompt", str(ECHO))
    assert done.returncode == 0, done.stderr
    assert "You are echo-agent, running on echo-mock. Answer briefly." in done.stdout
    assert '"name": "echo"' in done.stdout
