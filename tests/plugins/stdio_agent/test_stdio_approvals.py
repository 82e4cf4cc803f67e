"""The terminal front-end answers approvals (the REPL asks, one-shot declines unless
--yes) and shows the model's todo list as a checklist."""

from __future__ import annotations

import os
import pty
import termios
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh import cli
from dsh.testing import text, tool_call, tool_calls
from dsh_approval import Approval
from dsh_bash import Bash
from dsh_bash_local import LocalBash
from dsh_stdio_agent import EXIT_OK, checklist, read_stdin_key
from dsh_tool_bash import ToolBash
from dsh_tool_todo import ToolTodo
from tests.plugins.stdio_agent.stdio_support import front_rig, shell_deployment

pytestmark = pytest.mark.anyio

SHELL = ((Bash, None), (LocalBash, None), (ToolBash, None))
ASK = (*SHELL, (Approval, {"policy": "ask"}))


def run_printf(word: str) -> Any:
    return tool_calls(tool_call("bash", {"command": f"printf {word}"}))


@pytest.mark.parametrize(
    ("answer", "word", "reply"),
    [
        ("y", "HELLO", "ran"),
        *((answer, "NOPE", "ok, not running it") for answer in ("n", "", "whatever")),
    ],
    ids=["a-yes-runs-the-command", "n-declines", "empty-declines", "whatever-declines"],
)
async def test_the_repl_asks_and_only_y_runs_the_command(
    answer: str, word: str, reply: str
) -> None:
    # Anything but y declines, and the turn goes on.
    async with front_rig(run_printf(word), text(reply), plugins=ASK) as r:
        r.lines.feed("go", answer, "/exit")
        assert await r.front.run() == EXIT_OK
    if answer == "y":
        outcome = f"y\n[tool] bash -> {word}\n"
    else:
        declined = f"Error: the user declined: bash: printf {word}"
        outcome = f"n\n[tool] bash failed (APPROVAL_DENIED): {declined}\n"
    assert r.both.getvalue() == (
        f'[tool] bash {{"command": "printf {word}"}}\n'
        f"Allow bash: printf {word}? [y/N] {outcome}{reply}\n"
    )


async def test_the_end_of_input_at_the_question_declines() -> None:
    async with front_rig(run_printf("EOF"), text("fine"), plugins=ASK) as r:
        r.lines.feed("go")
        r.lines.close()
        assert await r.front.run() == EXIT_OK
    assert "Allow bash: printf EOF? [y/N] n\n" in r.both.getvalue()


async def test_an_injected_key_reader_answers_ctrl_c_is_no() -> None:
    keys = ["\x03", "Y"]

    async def read_key() -> str:
        return keys.pop(0)

    replies = [run_printf("ONE"), text("no"), run_printf("TWO"), text("yes")]
    async with front_rig(*replies, plugins=ASK) as r:
        r.front.read_key = read_key
        r.lines.feed("first", "second", "/exit")
        assert await r.front.run() == EXIT_OK
    out = r.both.getvalue()
    assert "Allow bash: printf ONE? [y/N] n\n" in out
    assert "Allow bash: printf TWO? [y/N] y\n[tool] bash -> TWO\n" in out


async def test_questions_are_asked_one_at_a_time() -> None:
    both = tool_calls(
        tool_call("bash", {"command": "printf A"}), tool_call("bash", {"command": "printf B"})
    )
    async with front_rig(both, text("both ran"), plugins=ASK) as r:
        r.lines.feed("go", "y", "y", "/exit")
        assert await r.front.run() == EXIT_OK
    out = r.both.getvalue()
    assert out.count("? [y/N] y\n") == 2
    assert "[tool] bash -> A\n[tool] bash -> B\n" in out


async def test_one_shot_declines_and_says_how_to_allow() -> None:
    async with front_rig(run_printf("X"), text("declined"), plugins=ASK) as r:
        assert await r.front.run(prompt="go") == EXIT_OK
    assert r.err.getvalue() == (
        '[tool] bash {"command": "printf X"}\n'
        "[approval] declined: bash: printf X (a one-shot run asks nobody; "
        "dsh run --yes allows every action)\n"
        "[tool] bash failed (APPROVAL_DENIED): Error: the user declined: bash: printf X\n"
    )
    assert r.out.getvalue() == "declined\n"


async def test_assume_yes_allows_without_asking() -> None:
    async with front_rig(run_printf("YES"), text("done"), plugins=ASK) as r:
        assert await r.front.run(prompt="go", assume_yes=True) == EXIT_OK
    assert "[approval] allowed (--yes): bash: printf YES\n[tool] bash -> YES\n" in (
        r.err.getvalue()
    )


async def test_the_responder_is_set_only_while_running() -> None:
    async with front_rig(text("hi"), plugins=ASK) as r:
        approval = r.root.approval
        assert approval._responders == []
        async with anyio.create_task_group() as tg:
            tg.start_soon(r.front.run)
            await r.lines.until_reading(1)
            assert approval._responders != []
            r.lines.close()
        assert approval._responders == []


async def test_without_the_approval_service_nothing_is_asked() -> None:
    async with front_rig(run_printf("FREE"), text("done"), plugins=SHELL) as r:
        r.lines.feed("go", "/exit")
        assert await r.front.run() == EXIT_OK
    assert "Allow" not in r.both.getvalue()
    assert "[tool] bash -> FREE\n" in r.both.getvalue()


# -- the todo checklist ------------------------------------------------------------------------


def todo(*items: tuple[str, str]) -> Any:
    todos = [{"content": c, "status": s} for c, s in items]
    return tool_calls(tool_call("todo_write", {"todos": todos}))


async def test_the_todo_list_is_shown_when_it_changes() -> None:
    first = todo(("read", "completed"), ("fix", "in_progress"), ("test", "pending"))
    replies = [first, first, todo(), text("planned")]
    async with front_rig(*replies, plugins=((ToolTodo, None),)) as r:
        assert await r.front.run(prompt="plan") == EXIT_OK
    err = r.err.getvalue()
    assert err.count("[todo] 1/3 completed\n  [x] read\n  [>] fix\n  [ ] test\n") == 1
    assert "[todo] (empty list)\n" in err


def test_checklist_marks() -> None:
    assert checklist([{"content": "a", "status": "odd"}]) == "[todo] 0/1 completed\n  [?] a"


# -- the command line --------------------------------------------------------------------------


def test_dsh_run_yes_allows_and_without_it_declines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = shell_deployment(tmp_path)
    assert cli.main(["run", str(path), "-p", "go", "--yes"]) == 0
    allowed = capsys.readouterr()
    assert allowed.out == "result: ALLOWED\n"
    assert "[approval] allowed (--yes): bash: printf ALLOWED" in allowed.err
    assert cli.main(["run", str(path), "-p", "go"]) == 0
    declined = capsys.readouterr()
    assert declined.out == "result: Error: the user declined: bash: printf ALLOWED\n"
    assert "[approval] declined: bash: printf ALLOWED" in declined.err


# -- one key from a terminal -------------------------------------------------------------------


async def test_read_stdin_key_takes_one_key_and_restores_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    master, slave = pty.openpty()
    try:
        with open(slave, encoding="utf-8", closefd=False) as tty:  # noqa: ASYNC230 - a pty
            monkeypatch.setattr("sys.stdin", tty)
            before = termios.tcgetattr(slave)
            modes: list[int] = []

            def ready() -> None:
                modes.append(termios.tcgetattr(slave)[3])
                os.write(master, b"\x03")  # Ctrl-C: a character now, not a signal

            assert await read_stdin_key(ready) == "\x03"
            assert modes[0] & (termios.ICANON | termios.ECHO | termios.ISIG) == 0
            assert termios.tcgetattr(slave) == before
            os.write(master, "é".encode())
            assert await read_stdin_key() == "é"
    finally:
        os.close(master)
        os.close(slave)


async def test_read_stdin_key_without_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", None)
    assert await read_stdin_key() == ""
