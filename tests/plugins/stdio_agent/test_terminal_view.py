"""What the terminal chat draws, read back the way a person sees it: the chat runs
in-process with piped keys, rich draws on a recorded console, and a terminal emulator
turns what was written into the screen (no screenshots: the screen's text)."""

from __future__ import annotations

import io
import logging
import re
import threading
from typing import Any

import anyio
import pytest
from rich.console import Console
from rich.text import Text

from dsh.testing import Mark, Reply, Wait, text, tool_call, tool_calls
from dsh_approval import Approval, ApprovalRequest
from dsh_llm import Finish, LlmFailure
from dsh_stdio_agent import EXIT_OK
from dsh_stdio_agent._terminal import TerminalChat
from dsh_stdio_agent._view import REDRAW, SPINNER, View
from dsh_tool_todo import ToolTodo
from dsh_tools import Tool, ToolCall
from tests.plugins.stdio_agent.stdio_support import EchoArgs, reasoning_reply
from tests.plugins.stdio_agent.terminal_support import WIDTH, TerminalRig, screen, terminal_rig

pytestmark = pytest.mark.anyio

BANNER = 'dsh: talking to agent "main" (scripted); /help lists the commands and keys.'
TOKENS = re.compile(r"↳ \d+\.\ds · (.*)")
#: Any frame of the spinner.
SPIN = f"[{SPINNER[0]}]"


@pytest.fixture
def anyio_backend() -> str:
    """prompt_toolkit's prompt_async needs asyncio (docs/rfc/0015-terminal-chat.md)."""
    return "asyncio"


@pytest.fixture(autouse=True)
def colours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)


async def chat(t: TerminalRig, keys: str) -> int:
    """Type ``keys`` (all at once: what the chat does not read yet waits, as typed
    keys do), run the chat until it quits, return its status."""
    t.type(keys)
    status: int = await t.rig.front.run()
    return status


def tokens(line: str) -> str:
    """The token part of a ``↳`` line (its time varies)."""
    found = TOKENS.fullmatch(line)
    assert found is not None, line
    return found.group(1)


MARKDOWN = [
    "# Title\n\nSome **bold",
    "** and `code`.\n\n- one\n",
    "- two\n\n```py\nx = 1\n```\n",
    "Done.",
]


async def test_the_transcript_has_markdown_one_line_per_tool_and_tokens() -> None:
    replies: list[Reply] = [
        tool_calls(tool_call("echo", {"text": "hi"}), usage=(7, 2)),
        text(*MARKDOWN, usage=(10, 5)),
    ]
    async with terminal_rig(*replies) as t:
        assert await chat(t, "show me\r\x04") == EXIT_OK
        lines = t.screen()
        raw = t.raw
    assert lines[:-1] == [
        BANNER,
        '▸ echo {"text": "hi"} → hi',
        " " * 37 + "Title",
        "",
        "Some bold and code.",
        "",
        " • one",
        " • two",
        "",
        "",
        " x = 1",
        "",
        "",
        "Done.",
    ]
    assert tokens(lines[-1]) == "17 in · 7 out"
    # The spinner was drawn, and is gone; the styles are the terminal's, not asterisks.
    assert "working…" in raw
    assert not any("working" in line for line in lines)
    assert "\x1b[2m▸ echo" in raw  # dim
    assert "\x1b[1mbold" in raw
    assert "\x1b[2m↳ " in raw


async def test_each_block_is_printed_once_however_the_answer_is_cut() -> None:
    answer = "First paragraph\nwraps here.\n\nSecond one.\n\n1. a\n2. b\n\nLast."
    for size in (1, 3, 7):
        parts = [answer[i : i + size] for i in range(0, len(answer), size)]
        async with terminal_rig(text(*parts)) as t:
            assert await chat(t, "go\r\x04") == EXIT_OK
            lines = t.screen()
        assert lines[1:-1] == [
            "First paragraph wraps here.",
            "",
            "Second one.",
            "",
            " 1 a",
            " 2 b",
            "",
            "Last.",
        ], size


async def test_the_spinner_counts_until_the_first_token_then_goes() -> None:
    waiting, go = anyio.Event(), anyio.Event()
    reply = [Mark(waiting), Wait(go), *text("here")]
    async with terminal_rig(reply) as t, anyio.create_task_group() as tg:
        t.type("hi\r\x04")
        tg.start_soon(t.rig.front.run)
        await waiting.wait()
        assert re.fullmatch(SPIN + r" working… · \d+\.\ds", t.screen()[-1])
        go.set()
    lines = t.screen()
    assert lines[1] == "here"
    assert TOKENS.fullmatch(lines[2]) is None  # no usage recorded: the time only
    assert re.fullmatch(r"↳ \d+\.\ds", lines[2])
    assert len(lines) == 3


async def test_a_retry_is_a_status_line_not_a_log_line() -> None:
    shown, go = anyio.Event(), anyio.Event()
    log = logging.getLogger("dsh.test-model")

    def retried(request: Any) -> list[Any]:
        log.info("raw retry line", extra={"dsh_status": "retrying in 0.5s (attempt 2 of 4)"})
        log.info("an INFO line the command line would not show")
        return [Mark(shown), Wait(go), *text("fine")]

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger("dsh").handlers[:] = [handler]
    logging.getLogger("dsh").setLevel(logging.WARNING)
    async with terminal_rig(retried) as t, anyio.create_task_group() as tg:
        t.type("hi\r\x04")
        tg.start_soon(t.rig.front.run)
        await shown.wait()
        assert re.fullmatch(
            SPIN + r" retrying in 0\.5s \(attempt 2 of 4\) · \d+\.\ds", t.screen()[-1]
        )
        log.warning("careful")
        other = threading.Thread(target=log.warning, args=("from a thread",))
        other.start()
        other.join()
        go.set()
    lines = t.screen()
    assert lines[1:4] == [
        "WARNING dsh.test-model: careful",
        "WARNING dsh.test-model: from a thread",
        "fine",
    ]
    assert "raw retry line" not in t.raw
    assert "INFO" not in t.raw
    assert not any("retrying" in line for line in lines)
    assert logging.getLogger("dsh").handlers == [handler]  # put back


@pytest.mark.parametrize("plain", ["NO_COLOR", "config"])
async def test_plain_text_without_markdown(plain: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config: dict[str, Any] = {}
    if plain == "NO_COLOR":
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        config["markdown"] = False
    async with terminal_rig(text("Some **bold**\nline", " two\n\n", "tail"), config=config) as t:
        assert await chat(t, "hi\r\x04") == EXIT_OK
        lines = t.screen()
    assert lines[1:-1] == ["Some **bold**", "line two", "", "tail"]


@pytest.mark.parametrize("show", [True, False])
async def test_reasoning_shows_dim_when_asked(show: bool) -> None:
    async with terminal_rig(reasoning_reply(), config={"show_reasoning": show}) as t:
        assert await chat(t, "hi\r\x04") == EXIT_OK
        lines = t.screen()
    assert lines[1:-1] == (["let me think", "answer"] if show else ["answer"])
    assert ("\x1b[2;3mlet me think" in t.raw) is show


async def test_a_tall_block_shows_its_tail_while_it_streams() -> None:
    streamed, go = anyio.Event(), anyio.Event()
    code = "".join(f"line {n}\n" for n in range(1, 31))
    reply = [*text("```\n" + code)[:-2], Mark(streamed), Wait(go), *text("```\n")[1:]]
    async with terminal_rig(reply, height=10) as t, anyio.create_task_group() as tg:
        t.type("hi\r\x04")
        tg.start_soon(t.rig.front.run)
        await streamed.wait()
        visible = screen(t.raw, rows=10)
        assert " line 30" in visible
        assert " line 21" not in visible  # the region keeps to the screen's height
        go.set()
    lines = screen(t.raw)
    assert [line for line in lines if line.startswith(" line ")] == [
        f" line {n}" for n in range(1, 31)
    ]


async def test_tool_lines_errors_several_lines_and_running_calls() -> None:
    entered, release = anyio.Event(), anyio.Event()

    async def hold(args: EchoArgs, call: ToolCall) -> str:
        entered.set()
        await release.wait()
        return ""

    replies: list[Reply] = [
        tool_calls(
            tool_call("nope"),
            tool_call("echo", {"text": "a\n\nb\nc"}),
            tool_call("hold", {"text": "x"}),
        ),
        text("done"),
    ]
    async with terminal_rig(*replies, config={"preview_chars": 20}) as t:
        t.rig.root.tools.register(
            Tool(name="hold", description="Holds.", parameters=EchoArgs, execute=hold)
        )
        async with anyio.create_task_group() as tg:
            t.type("go\r\x04")
            tg.start_soon(t.rig.front.run)
            await entered.wait()
            await anyio.wait_all_tasks_blocked()
            assert re.fullmatch(SPIN + r' hold \{"text": "x"\} · \d+\.\ds', t.screen()[-1])
            release.set()
        lines = t.screen()
    assert lines[1:-1] == [
        '✗ nope failed (UNKNOWN_TOOL): unknown tool "nope"',
        '▸ echo {"text": "a\\n\\nb\\nc… → a (+3 lines)',
        '▸ hold {"text": "x"} → (no output)',
        "done",
    ]
    assert "\x1b[2;31m✗ nope" in t.raw


async def test_the_end_of_a_turn_that_did_not_complete_is_shown() -> None:
    failed = [Finish("error", LlmFailure(message="down", code="DOWN"))]
    streamed = anyio.Event()
    hanging = [*text("partial")[:2], Mark(streamed), Wait(anyio.Event())]
    cut = text("cut", finish="max-tokens")
    async with terminal_rig(failed, hanging, cut) as t, anyio.create_task_group() as tg:
        t.type("one\rtwo\rthree\r\x04")
        tg.start_soon(t.rig.front.run)
        await streamed.wait()
        t.rig.front.interrupt()
    lines = t.screen()
    assert lines[1] == "[error] down (code DOWN)"
    assert lines[3:5] == ["partial", "[aborted] the turn was cancelled (user)"]
    assert lines[6:8] == ["cut", "[max-tokens] the answer stopped at the model's token limit"]
    assert "\x1b[31m[error]" in t.raw
    assert "\x1b[33m[aborted]" in t.raw
    assert "\x1b[33m[max-tokens]" in t.raw


async def test_todo_lists_and_subagent_activity() -> None:
    todos = [{"content": "read", "status": "completed"}, {"content": "fix", "status": "pending"}]

    async def delegate(args: EchoArgs, call: ToolCall) -> str:
        assert call.agent is not None
        sessions = call.agent.ctx.sessions
        child = sessions.create(meta={"parent_session": call.agent.session.id, "agent": "kid"})
        grandchild = sessions.create(meta={"parent_session": child.id, "agent": "grandkid"})
        stranger = sessions.create(meta={"agent": "stranger"})
        call_data = {"turn": 1, "step": 1, "call_id": "c", "name": "read", "arguments": "{}"}
        child.append("tool/call", call_data)
        grandchild.append("tool/call", call_data)
        stranger.append("tool/call", call_data)
        message = {"role": "assistant", "content": [{"type": "text", "text": "found it"}]}
        blank = {"role": "assistant", "content": [{"type": "text", "text": "  "}]}
        child.append("turn/start", {"turn": 1})  # not shown
        child.append("assistant/message", {"turn": 1, "step": 1, "message": blank})
        child.append("assistant/message", {"turn": 1, "step": 2, "message": message})
        return "found it"

    replies: list[Reply] = [
        tool_calls(tool_call("todo_write", {"todos": todos})),
        tool_calls(tool_call("delegate", {"text": "x"})),
        text("ok"),
    ]
    async with terminal_rig(*replies, plugins=((ToolTodo, None),)) as t:
        t.rig.root.tools.register(
            Tool(name="delegate", description="D.", parameters=EchoArgs, execute=delegate)
        )
        assert await chat(t, "plan\r\x04") == EXIT_OK
        lines = t.screen()
    assert lines[1:-1] == [
        "[todo] 1/2 completed",
        "  [x] read",
        "  [ ] fix",
        '▸ todo_write {"todos": [{"content": "read", "status": "completed"}, {"content":…',
        "  [kid] [tool] read {}",
        "    [grandkid] [tool] read {}",
        "  [kid] found it",
        '▸ delegate {"text": "x"} → found it',
        "ok",
    ]


async def test_an_approval_takes_the_live_region_down_while_it_asks() -> None:
    keys = ["y"]

    async def read_key() -> str:
        return keys.pop(0)

    async with terminal_rig(
        tool_calls(tool_call("gate", {"text": "hi"})),
        text("asked"),
        plugins=((Approval, {"policy": "ask"}),),
    ) as t:

        async def gated(args: EchoArgs, call: ToolCall) -> str:
            question = ApprovalRequest("gate", f"gate {args.text}", call=call)
            allowed = await t.rig.root.approval.request(question)
            return "allowed" if allowed else "declined"

        t.rig.root.tools.register(
            Tool(name="gate", description="G.", parameters=EchoArgs, execute=gated),
        )
        t.rig.front.read_key = read_key
        assert await chat(t, "go\r\x04") == EXIT_OK
        lines = t.screen()
    assert lines[1:-1] == [
        "Allow gate hi? [y/N] y",
        '▸ gate {"text": "hi"} → allowed',
        "asked",
    ]


async def test_with_yes_nothing_is_asked() -> None:
    async with terminal_rig(
        tool_calls(tool_call("gate", {"text": "hi"})),
        text("done"),
        plugins=((Approval, {"policy": "ask"}),),
    ) as t:

        async def gated(args: EchoArgs, call: ToolCall) -> str:
            question = ApprovalRequest("gate", f"gate {args.text}", call=call)
            return "allowed" if await t.rig.root.approval.request(question) else "declined"

        t.rig.root.tools.register(
            Tool(name="gate", description="G.", parameters=EchoArgs, execute=gated),
        )
        t.type("go\r\x04")
        assert await t.rig.front.run(assume_yes=True) == EXIT_OK
        lines = t.screen()
    assert lines[1:3] == ["[approval] allowed (--yes): gate hi", '▸ gate {"text": "hi"} → allowed']


async def test_a_rule_and_an_empty_answer_leave_no_stray_blank_lines() -> None:
    async with terminal_rig(text("Above\n\n---\n\nBelow"), text("\n\n")) as t:
        assert await chat(t, "one\rtwo\r\x04") == EXIT_OK
        lines = t.screen()
    assert lines[1:3] == ["Above", ""]
    assert len(lines[3]) == WIDTH
    assert not lines[3].strip("-─")  # the rule (ASCII on a console of unknown encoding)
    assert lines[4:6] == ["", "Below"]
    assert TOKENS.fullmatch(lines[6]) is None
    assert re.fullmatch(r"↳ \d+\.\ds", lines[7])  # the empty answer printed nothing


def live(view: View) -> bool:
    """Whether ``view`` shows a live region now."""
    return view.live is not None


def test_the_view_pauses_outside_a_turn_and_nested() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=WIDTH, height=50)
    view = View(console)
    with view.paused():  # a question outside a turn: no live region after it
        view.write("Allow a? [y/N] ")
        view.log("WARNING dsh.x: meanwhile")
    assert not live(view)
    view.begin()
    with view.paused():
        with view.paused():
            view.write("Allow b? [y/N] ")
        assert not live(view)
        view.write("y\n")
        view.log("WARNING dsh.x: during the question")  # drawn at once, no live region
    assert live(view)
    view.answer("streaming")
    view.tick()  # nothing new to draw
    view.end(Text("end"))
    assert not live(view)
    assert isinstance(console.file, io.StringIO)
    assert screen(console.file.getvalue()) == [
        "Allow a? [y/N]",
        "WARNING dsh.x: meanwhile",
        "Allow b? [y/N]",
        "y",
        "WARNING dsh.x: during the question",
        "streaming",
        "end",
    ]


class Clock:
    """A clock the test moves by hand (the view's time source)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_redraw_skipped_within_a_frame_is_drawn_by_the_next_tick() -> None:
    file = io.StringIO()
    console = Console(file=file, force_terminal=True, width=WIDTH, height=50)
    clock = Clock()
    view = View(console, markdown=False, clock=clock)
    view.begin()
    view.answer("first")  # the first piece is drawn at once
    assert screen(file.getvalue())[-1] == "first"
    view.answer(" second")  # no time has passed: skipped, left for the heartbeat
    assert "second" not in file.getvalue()
    view.tick()
    assert screen(file.getvalue())[-1] == "first second"
    drawn = file.getvalue()
    view.tick()  # nothing new: nothing drawn
    assert file.getvalue() == drawn
    clock.now += 2 * REDRAW
    view.answer(" third")  # later than REDRAW: drawn without waiting for the heartbeat
    assert screen(file.getvalue())[-1] == "first second third"
    view.end(Text("end"))
    assert screen(file.getvalue()) == ["first second third", "end"]


def test_each_tick_draws_the_spinner_frame_of_its_time() -> None:
    file = io.StringIO()
    console = Console(file=file, force_terminal=True, width=WIDTH, height=50)
    clock = Clock()
    view = View(console, clock=clock)
    view.begin()
    frames, interval = SPINNER
    assert screen(file.getvalue())[-1] == f"{frames[0]} working… · 0.0s"
    for step in range(1, len(frames) + 2):
        clock.now = 100.0 + (step + 0.5) * interval
        view.tick()
        shown = screen(file.getvalue())[-1]
        assert shown == f"{frames[step % len(frames)]} working… · {(step + 0.5) * interval:.1f}s"
    view.end(Text("end"))


async def test_the_spinner_moves_while_the_model_is_silent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The model answers only once the chat's heartbeat has redrawn the spinner, so the
    # turn outlasts a frame however fast the machine is.
    waiting, go, ticked = anyio.Event(), anyio.Event(), anyio.Event()
    reply = [Mark(waiting), Wait(go), *text("here")]
    async with terminal_rig(reply) as t, anyio.create_task_group() as tg:
        t.type("hi\r\x04")
        tg.start_soon(t.rig.front.run)
        await waiting.wait()
        chat = t.rig.front._chat
        assert isinstance(chat, TerminalChat)
        view = chat.view
        drawn = t.raw.count("working…")
        heartbeat = view.tick

        def tick() -> None:
            heartbeat()
            ticked.set()

        monkeypatch.setattr(view, "tick", tick)
        await ticked.wait()
        assert t.raw.count("working…") > drawn  # the heartbeat drew the spinner again
        assert re.fullmatch(SPIN + r" working… · \d+\.\ds", t.screen()[-1])
        go.set()
    lines = t.screen()
    assert lines[1] == "here"
    assert re.fullmatch(r"↳ \d+\.\ds", lines[2])
