"""The stdio-agent front-end in-process: one-shot and REPL runs against a scripted model,
output captured through the injected streams, Ctrl-C through ``interrupt()`` (the code
path of the SIGINT handler) and once as a real SIGINT."""

from __future__ import annotations

import io
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from dsh import Context, FiberState, ServiceNotFoundError
from dsh.testing import Mark, Reply, Wait, text, tool_call, tool_calls
from dsh_agent import StepBlocked
from dsh_llm import (
    BlockStart,
    Finish,
    LlmFailure,
    Message,
    TextDelta,
)
from dsh_session import Session
from dsh_stdio_agent import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    StdioAgent,
    StdioAgentError,
    exit_status,
    read_stdin_line,
)
from dsh_stdio_agent._report import describe_end
from dsh_tools import Tool, ToolCall
from tests.plugins.stdio_agent.stdio_support import LINE_HELP, EchoArgs, front_rig, reasoning_reply

pytestmark = pytest.mark.anyio


def hanging(streamed: anyio.Event) -> list[Any]:
    """A reply that streams "thinking", sets ``streamed`` and then holds the stream
    until the turn is cancelled."""
    return [BlockStart(0, "text"), TextDelta(0, "thinking"), Mark(streamed), Wait(anyio.Event())]


async def run_in_background(tg: anyio.abc.TaskGroup, fn: Callable[[], Awaitable[int]]) -> list[int]:
    """Start ``fn`` in ``tg``; the returned list receives its result."""
    result: list[int] = []

    async def runner() -> None:
        result.append(await fn())

    tg.start_soon(runner)
    return result


# -- one-shot ---------------------------------------------------------------------------


async def test_one_shot_streams_the_answer_to_stdout() -> None:
    async with front_rig(text("hel", "lo ", "there")) as r:
        assert await r.front.run(prompt="hi") == EXIT_OK
        assert r.out.getvalue() == "hello there\n"
        assert r.err.getvalue() == ""
        assert r.model.requests[0].messages[-1] == Message.user("hi")
        assert r.model.requests[0].system is not None
        assert "You are scripted-bot." in r.model.requests[0].system


async def test_one_shot_shows_tool_calls_in_order() -> None:
    replies: list[Reply] = [
        tool_calls(tool_call("echo", '{"text": "hi"}'), before="Let me check."),
        text("It said hi."),
    ]
    async with front_rig(*replies) as r:
        assert await r.front.run(prompt="echo hi") == EXIT_OK
        assert r.both.getvalue() == (
            'Let me check.\n[tool] echo {"text": "hi"}\n[tool] echo -> hi\nIt said hi.\n'
        )


async def test_tool_errors_and_long_previews_are_compact() -> None:
    arguments = '{"text": "' + "word " * 30 + '"}'
    replies: list[Reply] = [
        tool_calls(tool_call("nope")),
        tool_calls(tool_call("echo", arguments)),
        text("done"),
    ]
    async with front_rig(*replies, config={"preview_chars": 20}) as r:
        assert await r.front.run(prompt="go") == EXIT_OK
        err = r.err.getvalue().splitlines()
        assert err[0] == "[tool] nope {}"
        assert err[1] == '[tool] nope failed (UNKNOWN_TOOL): unknown tool "nope"'
        assert err[2] == '[tool] echo {"text": "word word…'
        assert err[3] == "[tool] echo -> word word word word…"
        assert r.out.getvalue() == "done\n"


async def test_a_failed_turn_exits_1_with_message_and_code() -> None:
    failure = LlmFailure(message="rate limited", code="RATE_LIMIT")
    async with front_rig([Finish("error", failure)]) as r:
        assert await r.front.run(prompt="hi") == EXIT_FAILED
        assert r.err.getvalue() == "[error] rate limited (code RATE_LIMIT)\n"
        assert r.out.getvalue() == ""


async def test_a_blocked_turn_exits_1() -> None:
    async with front_rig() as r:

        def refuse(*args: Any) -> Any:
            raise StepBlocked("no steps on Sundays")

        r.root.on("agent/pre-step", refuse)
        assert await r.front.run(prompt="hi") == EXIT_FAILED
        assert r.err.getvalue() == "[blocked] no steps on Sundays\n"
        assert r.model.requests == []


async def test_max_tokens_is_success_flagged_on_stderr() -> None:
    async with front_rig(text("cut sh", finish="max-tokens")) as r:
        assert await r.front.run(prompt="hi") == EXIT_OK
        assert r.out.getvalue() == "cut sh\n"
        assert r.err.getvalue() == "[max-tokens] the answer stopped at the model's token limit\n"


async def test_reasoning_is_hidden_unless_configured() -> None:
    async with front_rig(reasoning_reply()) as r:
        assert await r.front.run(prompt="hi") == EXIT_OK
        assert r.both.getvalue() == "answer\n"
    async with front_rig(reasoning_reply(), config={"show_reasoning": True}) as r:
        assert await r.front.run(prompt="hi") == EXIT_OK
        assert r.err.getvalue() == "let me think\n"
        assert r.out.getvalue() == "answer\n"
        assert r.both.getvalue() == "let me think\nanswer\n"


def raise_sigint(r: Any) -> None:
    # run() installs its SIGINT receiver before it sends anything.
    signal.raise_signal(signal.SIGINT)


@pytest.mark.parametrize(
    "interrupt",
    [lambda r: r.front.interrupt(), raise_sigint],
    ids=["ctrl-c", "a-real-sigint-takes-the-same-path"],
)
async def test_ctrl_c_cancels_the_one_shot_turn(interrupt: Callable[[Any], None]) -> None:
    streamed = anyio.Event()
    async with front_rig(hanging(streamed)) as r, anyio.create_task_group() as tg:
        status = await run_in_background(tg, lambda: r.front.run(prompt="hi"))
        await streamed.wait()
        # Another session's events are not this chat's business.
        other = r.root.sessions.create()
        other.append("turn/end", {"turn": 1, "reason": {"kind": "blocked", "message": "x"}})
        interrupt(r)
        await r.agent.when_idle()
        assert r.agent.session.turn_end(1) == {"kind": "aborted", "reason": "user"}
    assert status == [EXIT_INTERRUPTED]
    assert r.out.getvalue() == "thinking\n"
    assert r.err.getvalue() == "[aborted] the turn was cancelled (user)\n"


async def test_ctrl_c_while_waiting_for_an_earlier_turn_quits_one_shot() -> None:
    streamed = anyio.Event()
    async with front_rig(hanging(streamed)) as r, anyio.create_task_group() as tg:
        r.agent.send("started elsewhere")
        await streamed.wait()
        status = await run_in_background(tg, lambda: r.front.run(prompt="hi"))
        await anyio.wait_all_tasks_blocked()
        r.front.interrupt()
        await r.agent.when_idle()
        assert r.agent.session.last_turn() == 1  # "hi" never ran
        assert r.agent.session.turn_end(1) == {"kind": "aborted", "reason": "user"}
    assert status == [EXIT_INTERRUPTED]


@pytest.mark.parametrize("one_shot", [True, False])
async def test_a_second_ctrl_c_quits_while_the_turn_winds_down(one_shot: bool) -> None:
    entered = anyio.Event()
    release = anyio.Event()

    async def stubborn(args: EchoArgs, call: ToolCall) -> str:
        """A tool that finishes its work even when its turn is cancelled."""
        entered.set()
        with anyio.CancelScope(shield=True):
            await release.wait()
        return args.text

    async with front_rig(tool_calls(tool_call("stubborn", '{"text": "x"}')), text("late")) as r:
        r.root.tools.register(
            Tool(name="stubborn", description="Slow.", parameters=EchoArgs, execute=stubborn)
        )
        r.lines.feed("go")
        async with anyio.create_task_group() as tg:
            status = await run_in_background(
                tg, lambda: r.front.run(prompt="go" if one_shot else None)
            )
            await entered.wait()
            r.front.interrupt()  # cancel requested, but the tool holds the turn
            r.front.interrupt()  # quit now
        assert status == [EXIT_INTERRUPTED]
        assert r.agent.status == "running"
        release.set()
        await r.agent.when_idle()
        assert r.agent.session.turn_end(1) == {"kind": "aborted", "reason": "user"}


async def test_a_message_that_never_runs_fails() -> None:
    @dataclass
    class Idle:
        """An agent handle that drops every message."""

        id: str
        session: Session
        ctx: Context
        model: str | None = None
        cwd: str | None = None
        status: str = "idle"

        def send(self, message: str | Message) -> None:
            pass

        def steer(self, message: str | Message) -> None:
            pass

        def cancel(self) -> None:
            pass

        async def when_idle(self) -> None:
            pass

        async def dispose(self) -> None:
            pass

    async with front_rig() as r:
        r.root.agents.register(Idle("idle", r.root.sessions.create(), r.root))
        assert await r.front.run(agent_id="idle", prompt="hi") == EXIT_FAILED
        assert r.err.getvalue() == "[not run] the agent went idle without running the message\n"


# -- choosing the agent -----------------------------------------------------------------


async def test_agent_selection() -> None:
    two = {"agents": [{"id": "a"}, {"id": "b"}]}
    async with front_rig(text("from b"), core=two) as r:
        assert await r.front.run(prompt="hi") == EXIT_FAILED
        assert r.err.getvalue() == (
            'several agents are running ("a", "b"): name one '
            '(dsh run --agent ID, or the stdio-agent config key "agent")\n'
        )
        assert await r.front.run(agent_id="c", prompt="hi") == EXIT_FAILED
        assert 'unknown agent "c"; known agents: "a", "b"\n' in r.err.getvalue()
        assert await r.front.run(agent_id="b", prompt="hi") == EXIT_OK
        assert r.out.getvalue() == "from b\n"
        assert r.front.select_agent("a").id == "a"
    async with front_rig(text("from b"), core=two, config={"agent": "b"}) as r:
        assert r.front.select_agent().id == "b"
        assert await r.front.run(prompt="hi") == EXIT_OK
        assert r.out.getvalue() == "from b\n"
    async with front_rig(core={"model": None}) as r:
        assert r.root.agents.list() == []
        assert await r.front.run(prompt="hi") == EXIT_FAILED
        assert r.err.getvalue() == "there is no agent to talk to (declare one in agent-core)\n"
        with pytest.raises(StdioAgentError, match=r'unknown agent "x"; known agents: \(none\)'):
            r.front.select_agent("x")
    async with front_rig(core={"model": None}, config={"agent": "x"}) as r:
        # Started outside a deployment: no file to point at.
        with pytest.raises(StdioAgentError) as info:
            r.front.select_agent()
        assert str(info.value) == 'stdio-agent: agent "x" is not declared; known agents: (none)'


async def test_one_run_at_a_time() -> None:
    streamed = anyio.Event()
    async with front_rig(hanging(streamed)) as r, anyio.create_task_group() as tg:
        r.front.interrupt()  # not running: nothing happens
        await run_in_background(tg, lambda: r.front.run(prompt="hi"))
        await streamed.wait()
        with pytest.raises(StdioAgentError, match="already running") as info:
            await r.front.run(prompt="again")
        assert info.value.code == "STDIO_AGENT"
        r.front.interrupt()


# -- the REPL ---------------------------------------------------------------------------


async def test_repl_sends_lines_and_runs_commands() -> None:
    replies: list[Reply] = [
        tool_calls(tool_call("echo", '{"text": "hi"}')),
        text("It said hi."),
        text("Hello!"),
    ]
    async with front_rig(*replies) as r:
        r.lines.feed(
            "echo hi", "", "   ", "/help", "/prompt", "/bogus x", "hello", "/exit", "never"
        )
        assert await r.front.run() == EXIT_OK
        assert r.out.getvalue() == (
            "It said hi.\n"
            f"{LINE_HELP}"
            "You are an AI agent powered by dsh.\n\n"
            "You are scripted-bot.\n\n"
            "--- tools (1): echo\n"
            "Hello!\n"
        )
        assert r.err.getvalue() == (
            '[tool] echo {"text": "hi"}\n'
            "[tool] echo -> hi\n"
            "unknown command /bogus; /help lists the commands\n"
        )
        assert r.lines.reads == 8  # "never" was not read
        session = r.agent.session
        assert [session.turn_end(n) for n in (1, 2)] == [{"kind": "completed"}] * 2


async def test_a_piped_repl_exits_with_its_worst_turn_and_a_terminal_one_with_0() -> None:
    failed = [Finish("error", LlmFailure(message="down", code="DOWN"))]
    async with front_rig(failed, text("fine")) as r:
        r.lines.feed("hi", "again")
        r.lines.close()
        assert await r.front.run() == EXIT_FAILED  # the later success does not hide it
        assert r.err.getvalue() == "[error] down (code DOWN)\n"
    async with front_rig(failed, interactive=True) as r:
        r.lines.feed("hi", "/exit")
        assert await r.front.run() == EXIT_OK  # the user saw it


async def test_interactive_repl_shows_banner_and_prompt() -> None:
    async with front_rig(text("hello"), interactive=True, config={"prompt": "you> "}) as r:
        r.lines.feed("hi")
        r.lines.close()
        assert await r.front.run() == EXIT_OK
        assert r.err.getvalue() == (
            'dsh: talking to agent "main" (scripted). /help lists the commands; '
            "Ctrl-C cancels a turn; Ctrl-D quits.\n"
        )
        # The typed line (and its newline) is the terminal's echo, not ours.
        assert r.out.getvalue() == "you> hello\nyou> \n"


async def test_prompt_command_reports_render_errors() -> None:
    async with front_rig(core={"persona": "On {{modle}}."}) as r:
        r.lines.feed("/prompt", "/exit")
        assert await r.front.run() == EXIT_OK
        assert r.out.getvalue() == ""
        err = r.err.getvalue()
        assert err.startswith('[prompt] unknown prompt variable "{{modle}}"')
        assert 'section "deployment:persona"' in err


async def test_repl_ctrl_c_cancels_the_turn_and_goes_on() -> None:
    streamed = anyio.Event()
    async with (
        front_rig(hanging(streamed), text("still here")) as r,
        anyio.create_task_group() as tg,
    ):
        r.lines.feed("wait")
        status = await run_in_background(tg, r.front.run)
        await streamed.wait()
        r.front.interrupt()
        await r.lines.until_reading(2)
        assert r.err.getvalue() == "[aborted] the turn was cancelled (user)\n"
        r.lines.feed("again", "/exit")
        await r.lines.until_reading(3)  # "/exit": the turn of "again" is over
        assert r.agent.session.turn_end(2) == {"kind": "completed"}
    assert status == [EXIT_OK]
    assert r.out.getvalue() == "thinking\nstill here\n"


async def test_repl_ctrl_c_then_ctrl_c_at_the_prompt_quits() -> None:
    streamed = anyio.Event()
    async with front_rig(hanging(streamed)) as r, anyio.create_task_group() as tg:
        r.lines.feed("wait")
        status = await run_in_background(tg, r.front.run)
        await streamed.wait()
        r.front.interrupt()
        await r.lines.until_reading(2)
        r.front.interrupt()
    assert status == [EXIT_INTERRUPTED]


@pytest.mark.parametrize("interactive", [False, True])
async def test_repl_ctrl_c_at_the_prompt_asks_for_a_second(interactive: bool) -> None:
    async with front_rig(interactive=interactive) as r, anyio.create_task_group() as tg:
        status = await run_in_background(tg, r.front.run)
        await r.lines.until_reading(1)
        r.front.interrupt()
        assert r.err.getvalue().endswith("(press Ctrl-C again to quit, or type /exit)\n")
        r.front.interrupt()
    assert status == [EXIT_INTERRUPTED]
    assert r.out.getvalue() == ("> \n> \n" if interactive else "")


async def test_a_typed_line_resets_the_ctrl_c_count() -> None:
    async with front_rig() as r, anyio.create_task_group() as tg:
        status = await run_in_background(tg, r.front.run)
        await r.lines.until_reading(1)
        r.front.interrupt()
        r.lines.feed("/help")
        await r.lines.until_reading(2)
        r.front.interrupt()  # the first in a row again: only the hint
        assert r.err.getvalue().count("press Ctrl-C again") == 2
        r.lines.close()
    assert status == [EXIT_OK]


# -- lifecycle and helpers --------------------------------------------------------------


async def test_run_leaves_no_listener_and_disposal_removes_the_service() -> None:
    async with front_rig(text("ok")) as r:
        listeners = r.root.events.event("session/event").listeners
        before = len(listeners())
        assert await r.front.run(prompt="hi") == EXIT_OK
        assert len(listeners()) == before
        fiber = r.root.frontend.home_ctx.fiber
        await fiber.dispose()
        assert r.root.get("frontend") is None
        with pytest.raises(ServiceNotFoundError):
            _ = r.root.frontend


async def test_it_waits_for_its_services() -> None:
    async with Context() as root:
        fiber = await root.plugin(StdioAgent)
        assert fiber.state is FiberState.PENDING
        assert root.get("frontend") is None


async def test_default_input_is_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("one\ntwo"))
    assert [await read_stdin_line() for _ in range(3)] == ["one\n", "two", ""]

    class Closed:
        def readline(self) -> str:
            raise ValueError("I/O operation on closed file")

    monkeypatch.setattr("sys.stdin", Closed())
    assert await read_stdin_line() == ""


def test_exit_status_and_turn_end_lines() -> None:
    assert exit_status({"kind": "completed"}) == EXIT_OK
    assert exit_status({"kind": "max-tokens"}) == EXIT_OK
    assert exit_status({"kind": "aborted", "reason": "user"}) == EXIT_INTERRUPTED
    assert exit_status({"kind": "error", "message": "x", "code": "X"}) == EXIT_FAILED
    assert exit_status({"kind": "blocked", "message": "x"}) == EXIT_FAILED
    assert exit_status({"kind": "interrupted"}) == EXIT_FAILED
    assert exit_status(None) == EXIT_FAILED
    assert describe_end({"kind": "completed"}) is None
    assert describe_end({"kind": "aborted"}) == "[aborted] the turn was cancelled (user)"
    assert describe_end({"kind": "interrupted"}) == "[interrupted] the turn ended"
    assert describe_end({"kind": "odd", "message": "why"}) == "[odd] why"
