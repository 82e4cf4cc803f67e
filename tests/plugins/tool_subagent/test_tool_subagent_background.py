"""Background runs: ``started subagent <id>``, the settlement notice as the parent's
next turn, ``send_message`` and ``list_agents``, and disposing the parent disposes
every child."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh.testing import (
    Mark,
    Reply,
    Wait,
    capture_logs,
    errors_logged,
    failure,
    text,
    tool_call,
    tool_calls,
)
from dsh_agent import Agent, AgentError
from dsh_subagent import SubagentResult, SubagentRun
from dsh_tool_subagent import background_notice
from tests.plugins.tool_subagent.tool_subagent_support import (
    Rig,
    subagent_rig,
    tool_results,
    user_texts,
)

pytestmark = pytest.mark.anyio

FINISHED = "finished and will do no further work unless you send it more."
STOPPED = "was stopped before it finished."
FAILED = "failed before it finished."


def in_background(prompt: str = "count the files", description: str = "count files") -> Reply:
    return tool_calls(
        tool_call(
            "subagent",
            {"description": description, "prompt": prompt, "run_in_background": True},
        )
    )


async def start(
    rig: Rig, agent: Agent | None = None, description: str = "count files"
) -> SubagentRun:
    """Start a background child of ``agent`` (default: ``main``) by calling the tool."""
    done = await rig.call(
        "subagent",
        {"description": description, "prompt": "go", "run_in_background": True},
        agent,
    )
    run = rig.runs[-1]
    assert (done.content, done.is_error) == (f"started subagent {run.id}", False)
    return run


def hanging(started: anyio.Event) -> list[Any]:
    return [Mark(started), Wait(anyio.Event())]


async def test_the_parents_next_turn_gets_the_notice_with_the_closing_message() -> None:
    async with subagent_rig() as rig:
        rig.route(
            [in_background(), text("Started it."), text("Noted: 42 files.")],
            [text("There are 42 files.")],
        )
        rig.main.send("go")
        await rig.main.when_idle()
        (run,) = rig.runs
        (result,) = tool_results(rig.main)
        assert result["content"] == f"started subagent {run.id}"
        await run.result
        await rig.main.when_idle()
        assert user_texts(rig.main) == [
            "go",
            f"Background subagent {run.id} {FINISHED}\nIts closing message:\nThere are 42 files.",
        ]
        assert rig.main.session.turn_end(2) == {"kind": "completed"}
        # It lives on, idle, until its parent is disposed.
        assert rig.children() == [run.agent]
        assert run.agent.status == "idle"


@pytest.mark.parametrize(
    ("child", "notice"),
    [
        ([failure("boom", "BOOM")], f"{FAILED}\nIt left no closing message."),
        (
            [tool_calls(tool_call("echo", {"text": "a"}), before="Partial."), failure("x", "X")],
            f"{FAILED}\nIts closing message:\nPartial.",
        ),
        ([text("cut", finish="max-tokens")], f"{FAILED}\nIts closing message:\ncut"),
    ],
)
async def test_a_child_that_fails_says_so_in_the_notice(child: list[Reply], notice: str) -> None:
    async with subagent_rig() as rig:
        rig.route([text("ok")], child)
        run = await start(rig)
        await run.result
        await rig.main.when_idle()
        assert user_texts(rig.main) == [f"Background subagent {run.id} {notice}"]


async def test_a_child_that_is_stopped_says_so_in_the_notice() -> None:
    async with subagent_rig() as rig:
        started = anyio.Event()
        rig.route([text("ok")], [hanging(started)])
        run = await start(rig)
        await started.wait()
        run.agent.cancel()
        await run.result
        await rig.main.when_idle()
        assert user_texts(rig.main) == [
            f"Background subagent {run.id} {STOPPED}\nIt left no closing message."
        ]


@pytest.mark.parametrize(
    ("result", "how"),
    [
        (SubagentResult("", "completed"), FINISHED),
        (SubagentResult("", "aborted"), STOPPED),
        (SubagentResult("", "error"), FAILED),
        (SubagentResult("", "refusal"), FAILED),
        (SubagentResult("", "max-tokens"), FAILED),
    ],
)
def test_the_notice_says_how_the_child_ended(result: SubagentResult, how: str) -> None:
    assert background_notice("c-1", result) == (
        f"Background subagent c-1 {how}\nIt left no closing message."
    )


# -- send_message and list_agents -----------------------------------------------------------


async def test_send_message_gives_a_child_its_next_turn_and_a_new_notice() -> None:
    async with subagent_rig() as rig:
        rig.route([text("ok"), text("ok again")], [text("First."), text("Second.")])
        run = await start(rig)
        await run.result
        await rig.main.when_idle()
        done = await rig.call("send_message", {"subagent_id": run.id, "message": "and now?"})
        assert (done.content, done.is_error) == (
            f"message queued as the next turn for subagent {run.id}",
            False,
        )
        await run.agent.when_idle()
        await rig.main.when_idle()
        assert user_texts(run.agent) == ["go", "and now?"]
        assert user_texts(rig.main) == [
            f"Background subagent {run.id} {FINISHED}\nIts closing message:\nFirst.",
            f"Background subagent {run.id} {FINISHED}\nIts closing message:\nSecond.",
        ]


async def test_send_message_reaches_direct_children_only() -> None:
    async with subagent_rig() as rig:
        other = rig.root.agents.create("other", model="scripted")
        rig.route([text("ok")], [text("done")])
        theirs = await start(rig, other)
        await theirs.result
        for subagent_id in ("nope", theirs.id):
            done = await rig.call("send_message", {"subagent_id": subagent_id, "message": "hi"})
            assert (done.content, done.is_error, done.code) == (
                f'Error: no subagent "{subagent_id}" of this agent (list_agents shows them)',
                True,
                "SUBAGENT_NOT_FOUND",
            )
        await other.dispose()


async def test_send_message_refuses_an_empty_message() -> None:
    async with subagent_rig() as rig:
        rig.route([text("ok"), text("ok")], [text("done"), text("done")])
        first = await start(rig)
        await first.result
        run = await start(rig)
        await run.result
        done = await rig.call("send_message", {"subagent_id": run.id, "message": " "})
        assert (done.content, done.code) == (
            "Error: invalid message: expected a non-empty string",
            "INVALID_ARGS",
        )
        assert user_texts(run.agent) == ["go"]


async def test_list_agents_shows_each_child_with_its_status_and_label() -> None:
    async with subagent_rig() as rig:
        assert (await rig.call("list_agents", {})).content == "(no subagents)"
        started = anyio.Event()
        rig.route([text("ok")], [text("done"), hanging(started)])
        idle = await start(rig, description="count files")
        await idle.result
        busy = await start(rig, description="read the logs")
        await started.wait()
        listed = await rig.call("list_agents", {})
        assert listed.content == (
            f"{idle.id} [idle] — count files\n{busy.id} [running] — read the logs"
        )
        await busy.agent.dispose()
        assert (await rig.call("list_agents", {})).content == f"{idle.id} [idle] — count files"


async def test_the_control_tools_need_a_calling_agent() -> None:
    async with subagent_rig() as rig:
        listed = await rig.root.tools.execute("list_agents", {})
        sent = await rig.root.tools.execute("send_message", {"subagent_id": "x", "message": "m"})
    assert listed.content == "(no subagents)"
    assert sent.code == "SUBAGENT_NOT_FOUND"


async def test_cancelling_the_parents_turn_leaves_a_background_child_running() -> None:
    async with subagent_rig() as rig:
        started, waiting = anyio.Event(), anyio.Event()
        rig.route([in_background(), [Mark(waiting), Wait(anyio.Event())]], [hanging(started)])
        rig.main.send("go")
        await started.wait()
        await waiting.wait()
        rig.main.cancel()
        await rig.main.when_idle()
        assert rig.main.session.turn_end(1) == {"kind": "aborted", "reason": "user"}
        (run,) = rig.runs
        assert run.agent.status == "running"
        assert not run.result.done


# -- disposal ------------------------------------------------------------------------------------


async def test_disposing_the_parent_disposes_every_child() -> None:
    async with subagent_rig() as rig:
        boss = rig.root.agents.create("boss", model="scripted")
        started = anyio.Event()
        rig.route([text("ok")], [text("done"), hanging(started)])
        idle = await start(rig, boss)
        await idle.result
        await boss.when_idle()
        busy = await start(rig, boss, "still busy")
        await started.wait()
        assert [a.id for a in rig.children()] == ["boss", idle.id, busy.id]
        with capture_logs() as logs:
            await boss.dispose()
        assert rig.children() == []
        assert rig.root.sessions.list() == [rig.main.session]
        assert busy.agent.session.turn_end(1) == {"kind": "aborted", "reason": "disposed"}
        assert (await busy.result).stop_reason == "aborted"
        assert errors_logged(logs) == []
        listed = await rig.call("list_agents", {})
        assert listed.content == "(no subagents)"


class Refusing:
    """A parent handle that takes no more messages (as a disposed agent would)."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)

    def send(self, message: object) -> None:
        raise AgentError("this agent takes no more messages")


async def test_a_notice_nobody_can_take_is_dropped_quietly() -> None:
    async with subagent_rig() as rig:
        rig.route([], [text("done")])
        parent: Any = Refusing(rig.main)
        with capture_logs("dsh.tool-subagent") as logs:
            run = await start(rig, parent)
            await run.result
        assert rig.main.session.events == []
        assert logs.messages() == [
            f"no notice for subagent {run.id}: this agent takes no more messages"
        ]
