"""The terminal chat's input and commands in-process: keys are piped into
prompt_toolkit, the model sees what was sent, the screen shows the commands' output."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.testing import Mark, Wait, text, until
from dsh_session_jsonl import JsonlSessions
from dsh_stdio_agent import EXIT_INTERRUPTED, EXIT_OK, StdioAgent, read_stdin_line
from dsh_stdio_agent._service import default_history_file
from dsh_stdio_agent._terminal import KEYS, discard_typeahead, held_input, session_usage
from tests.plugins.stdio_agent.stdio_support import LINE_HELP
from tests.plugins.stdio_agent.terminal_support import TerminalRig, terminal_rig
from tests.support import ECHO

pytestmark = pytest.mark.anyio

HINT = "(press Ctrl-C again to quit, or type /exit)"


def tokens_line(line: str) -> str:
    """The token part of a ``↳`` line (its time varies)."""
    found = re.fullmatch(r"↳ \d+\.\ds · (.*)", line)
    assert found is not None, line
    return found.group(1)


@pytest.fixture
def anyio_backend() -> str:
    """prompt_toolkit's prompt_async needs asyncio (docs/rfc/0015-terminal-chat.md)."""
    return "asyncio"


async def chat(t: TerminalRig, keys: str) -> int:
    """Type ``keys`` at once (the chat reads them prompt by prompt, as typed-ahead
    keys are read) and run the chat until it quits."""
    t.type(keys)
    status: int = await t.rig.front.run()
    return status


def sent(t: TerminalRig) -> list[str]:
    """The text of each message the model received last in its requests."""
    return [request.messages[-1].text for request in t.rig.model.requests]


async def at_prompt(t: TerminalRig, count: int) -> None:
    """Wait until the chat's ``count``-th prompt is up and idle (its history loaded):
    keys typed from then on are read by that prompt, as a person's are."""
    front = t.rig.front
    await until(lambda: front._chat is not None and front._chat.prompts >= count)
    await anyio.wait_all_tasks_blocked()


async def typing(t: TerminalRig, *lines: str) -> int:
    """Run the chat, typing each of ``lines`` at its own prompt; its exit status."""
    status: list[int] = []

    async def run() -> None:
        status.append(await t.rig.front.run())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        for count, line in enumerate(lines, 1):
            await at_prompt(t, count)
            t.type(line)
    return status[0]


def hanging(streamed: anyio.Event) -> list[Any]:
    return [*text("thinking")[:2], Mark(streamed), Wait(anyio.Event())]


async def test_arrows_edit_the_line_and_enter_sends_it() -> None:
    async with terminal_rig("ok") as t:
        # Left arrow twice, insert, End, more: no escape codes reach the model.
        assert await chat(t, "helo wrld\x1b[D\x1b[D\x1b[Do\x1b[F!\x1b[Hsay \r\x04") == 0
        assert sent(t) == ["say helo world!"]


async def test_alt_enter_and_a_paste_make_one_message_of_several_lines() -> None:
    async with terminal_rig("one", "two") as t:
        paste = "\x1b[200~first line\nsecond line\r\nthird line\x1b[201~"
        assert await chat(t, f"   \rtop\x1b\rbottom\r{paste}\r\x04") == EXIT_OK  # blank: skipped
        assert sent(t) == ["top\nbottom", "first line\nsecond line\nthird line"]
        assert t.rig.agent.session.last_turn() == 2


async def test_history_is_kept_in_a_file_across_chats(tmp_path: Path) -> None:
    history = tmp_path / "state" / "dsh" / "history"
    config = {"history_file": str(history)}
    async with terminal_rig("first", "second", config=config) as t:
        assert await typing(t, "remember me\r", "\x1b[A\r", "\x04") == EXIT_OK
        assert sent(t) == ["remember me", "remember me"]
    assert "+remember me" in history.read_text()
    assert history.stat().st_mode & 0o777 == 0o600
    async with terminal_rig("third", config=config) as t:
        assert await typing(t, "\x1b[A\x1b[A\r", "\x04") == EXIT_OK
        assert sent(t) == ["remember me"]


async def test_without_a_history_file_the_chat_still_recalls_its_own_lines() -> None:
    async with terminal_rig("a", "b") as t:
        assert await typing(t, "again\r", "\x1b[A\r", "\x04") == EXIT_OK
        assert sent(t) == ["again", "again"]


async def test_an_unusable_history_file_is_reported_and_the_chat_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A relative path: the message stays on one row however long tmp_path is (xdist).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("not a folder")
    config = {"history_file": "file/history"}
    async with terminal_rig("ok", config=config) as t:
        assert await chat(t, "hi\r\x04") == EXIT_OK
        shown = " ".join(t.screen())
        assert "[history] file/history: [Errno" in shown
        assert "only this chat's messages can be recalled" in shown
        assert sent(t) == ["hi"]


def test_the_default_history_file_is_in_the_state_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/state")
    assert default_history_file() == "/state/dsh/history"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_history_file() == "~/.local/state/dsh/history"


async def test_ctrl_c_clears_the_line_and_twice_on_an_empty_line_quits() -> None:
    async with terminal_rig() as t:
        assert await chat(t, "typed\x03\x03\x03") == EXIT_INTERRUPTED
        assert t.screen()[1:] == [HINT]
        assert sent(t) == []


async def test_a_sent_line_starts_the_ctrl_c_count_again() -> None:
    async with terminal_rig("hello") as t:
        assert await chat(t, "\x03hi\r\x03\x04") == EXIT_OK
        assert t.screen().count(HINT) == 2


async def test_a_signal_at_the_prompt_acts_like_the_key() -> None:
    async with terminal_rig() as t, anyio.create_task_group() as tg:
        tg.start_soon(t.rig.front.run)
        front = t.rig.front
        await until(lambda: front._chat is not None and front._chat.app is not None)
        front.interrupt()
        await until(lambda: HINT in t.screen())
        front.interrupt()
    assert t.rig.front._chat is None


async def test_two_signals_at_once_at_the_prompt_quit() -> None:
    async with terminal_rig() as t, anyio.create_task_group() as tg:
        result: list[int] = []

        async def run() -> None:
            result.append(await t.rig.front.run())

        tg.start_soon(run)
        await at_prompt(t, 1)
        t.rig.front.interrupt()
        t.rig.front.interrupt()  # the prompt is ending: counted all the same
    assert result == [EXIT_INTERRUPTED]
    assert t.screen()[1:] == [HINT]


async def test_ctrl_c_cancels_the_running_turn_and_the_chat_goes_on() -> None:
    streamed = anyio.Event()
    async with terminal_rig(hanging(streamed), "still here") as t:
        async with anyio.create_task_group() as tg:
            t.type("wait\ragain\r\x04")
            tg.start_soon(t.rig.front.run)
            await streamed.wait()
            t.rig.front.interrupt()
        lines = t.screen()
        assert lines[1:3] == ["thinking", "[aborted] the turn was cancelled (user)"]
        assert lines[4] == "still here"
        assert sent(t) == ["wait", "again"]


async def test_a_second_ctrl_c_during_a_turn_quits() -> None:
    streamed = anyio.Event()
    async with terminal_rig(hanging(streamed)) as t, anyio.create_task_group() as tg:
        result: list[int] = []

        async def run() -> None:
            result.append(await t.rig.front.run())

        t.type("wait\r")
        tg.start_soon(run)
        await streamed.wait()
        t.rig.front.interrupt()
        t.rig.front.interrupt()
    assert result == [EXIT_INTERRUPTED]


async def test_model_clear_tokens_and_the_other_commands() -> None:
    async with terminal_rig(text("one", usage=(10, 5)), text("two", usage=(3, 1))) as t:
        t.rig.model.install(t.rig.root, ["other"])
        keys = [
            "/model",
            "/model nope",
            "/tokens",
            "hi",
            "/model other",
            "/tokens",
            "/clear",
            "/model",
            "/tokens",
            "again",
            "/sessions",
            "/prompt",
            "/bogus",
            "/help",
            "/exit",
            "never",
        ]
        first = t.rig.agent.session.id
        assert await chat(t, "".join(f"{key}\r" for key in keys)) == EXIT_OK
        agent = t.rig.agent
        lines = t.screen()
    second = agent.session.id
    assert second != first
    assert [r.model for r in t.rig.model.requests] == ["scripted", "other"]
    assert [r.messages[-1].text for r in t.rig.model.requests] == ["hi", "again"]
    assert len(t.rig.model.requests[1].messages) == 1  # the new session forgot "hi"
    assert lines[1:] == [
        "model: scripted; known models: other, scripted",
        'unknown model "nope"; known models: other, scripted',
        "0 turns: no tokens recorded",
        "one",
        lines[5],
        "model: other (from the next turn on)",
        "1 turn: 10 in · 5 out",
        f"new session {second}",
        f"  the previous one, {first}, was not stored",
        "model: other; known models: other, scripted",
        "0 turns: no tokens recorded",
        "two",
        lines[13],
        "no session persistence is configured (add session-jsonl)",
        "You are an AI agent powered by dsh.",
        "",
        "You are other-bot.",
        "",
        "--- tools (1): echo",
        "unknown command /bogus; /help lists the commands",
        *LINE_HELP.splitlines()[:-1],
        *KEYS.splitlines(),
    ]
    assert tokens_line(lines[5]) == "10 in · 5 out"
    assert tokens_line(lines[13]) == "3 in · 1 out"


async def test_sessions_lists_the_stored_ones_and_marks_this_one(tmp_path: Path) -> None:
    store = ((JsonlSessions, {"root": str(tmp_path)}),)
    async with terminal_rig("one", "two", plugins=store) as t:
        first = t.rig.agent.session.id
        assert await chat(t, "hi\r/sessions\r/clear\r/sessions\r\x04") == EXIT_OK
        lines = t.screen()
    listed = [line for line in lines if re.match(r"[* ] [0-9a-f]{32}  ", line)]
    # Before /clear: this session, marked; after: the same one, not marked (the new
    # session has recorded nothing, so it is not stored yet).
    assert [line[:34] for line in listed] == [f"* {first}", f"  {first}"]
    assert f"  the previous one, {first}, stays stored" in lines


async def test_session_usage_sums_cached_and_reasoning_tokens() -> None:
    async with terminal_rig() as t:
        session = t.rig.agent.session
        assert session_usage(session) is None
        data = {"role": "assistant", "content": []}
        session.append("turn/start", {"turn": 1})
        session.append("assistant/message", {"turn": 1, "step": 1, "message": data})
        for usage in (
            {"input_tokens": 1, "output_tokens": 2, "cache_read_tokens": 3},
            {"input_tokens": 1000, "output_tokens": 2, "reasoning_tokens": 5},
        ):
            session.append(
                "assistant/message", {"turn": 1, "step": 2, "message": data, "usage": usage}
            )
        total = session_usage(session, 1)
        assert total is not None
        assert (total.input_tokens, total.output_tokens) == (1001, 4)
        assert (total.cache_read_tokens, total.cache_write_tokens) == (3, None)
        assert total.reasoning_tokens == 5
        assert session_usage(session, 2) is None
        t.type("/tokens\r\x04")
        assert await t.rig.front.run() == EXIT_OK
        assert t.screen()[-1] == "1 turn: 1,001 in · 4 out · 3 cached · 5 reasoning"


def test_keys_typed_ahead_are_dropped_before_a_question(monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty.openpty()
    try:
        with open(slave, closefd=False) as stdin:
            monkeypatch.setattr("sys.stdin", stdin)
            os.write(master, b"yes please")  # typed while the turn ran
            discard_typeahead()
            os.write(master, b"n\n")
            assert os.read(slave, 10) == b"n\n"
    finally:
        os.close(master)
        os.close(slave)
    discard_typeahead()  # stdin is no terminal: nothing to do


def test_held_input_turns_echo_off_and_back(monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = pty.openpty()
    try:
        with open(slave, closefd=False) as stdin:
            monkeypatch.setattr("sys.stdin", stdin)
            with held_input():
                assert not termios.tcgetattr(slave)[3] & termios.ECHO
                assert termios.tcgetattr(slave)[3] & termios.ISIG  # Ctrl-C still a signal
            assert termios.tcgetattr(slave)[3] & termios.ECHO
    finally:
        os.close(master)
        os.close(slave)
    monkeypatch.setattr("sys.stdin", None)
    with held_input():  # no terminal: nothing to do
        pass


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_the_terminal_chat_runs_on_terminals_and_asyncio_only(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh import Context

    class Tty(io.StringIO):
        def __init__(self, tty: bool) -> None:
            super().__init__()
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    async with Context() as root:
        front = StdioAgent(root, StdioAgent.Config())
        monkeypatch.setenv("TERM", "xterm")
        monkeypatch.setattr("sys.stdin", Tty(True))
        out = Tty(True)
        assert front._wants_terminal(out) is (anyio_backend == "asyncio")
        assert front._wants_terminal(Tty(False)) is False
        monkeypatch.setenv("TERM", "dumb")
        assert front._wants_terminal(out) is False
        monkeypatch.setenv("TERM", "xterm")
        monkeypatch.setattr("sys.stdin", Tty(False))
        assert front._wants_terminal(out) is False
        monkeypatch.setattr("sys.stdin", None)
        assert front._wants_terminal(out) is False
        monkeypatch.setattr("sys.stdin", Tty(True))

        async def other_input() -> str:
            return ""

        front.read_line = other_input
        assert front._wants_terminal(out) is False
        front.read_line = read_stdin_line
        front.terminal = False
        assert front._wants_terminal(out) is False
        front.terminal = True
        assert front._wants_terminal(Tty(False)) is True


def test_the_ui_libraries_load_only_for_the_terminal_chat() -> None:
    probe = (
        "import sys\n"
        "import dsh_stdio_agent\n"
        "from dsh import cli\n"
        f"assert cli.main(['run', {str(ECHO)!r}, '-p', 'hi']) == 0\n"
        "loaded = [m for m in ('prompt_toolkit', 'rich', 'markdown_it') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


async def test_without_a_console_it_draws_on_stdout() -> None:
    async with terminal_rig("an answer") as t:
        t.rig.front.console = None
        assert await chat(t, "hi\r\x04") == EXIT_OK
        assert "an answer" in t.rig.out.getvalue()
        assert t.raw == ""
