"""Foreground runs: the child's last assistant text comes back, a child that does not
complete is an error result with its headline, diagnostic and partial output, bad
input is an error result and the parent's turn goes on, and cancelling the parent's
turn cancels and awaits the child."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh.testing import Mark, Reply, Wait, failure, text, tool_call, tool_calls
from dsh_agent import StepBlocked
from dsh_llm import BlockStart, Message, TextBlock, TextDelta
from dsh_subagent import SubagentResult
from dsh_tool_subagent import failure as failure_result
from dsh_tools import ToolCall
from tests.plugins.tool_subagent.tool_subagent_support import (
    FORK,
    SPAWN,
    Provider,
    subagent_rig,
    tool_results,
)

pytestmark = pytest.mark.anyio


def delegate(prompt: str = "find the bug", tool: str = "subagent", **more: Any) -> Reply:
    """The parent's step that calls ``tool``."""
    return tool_calls(tool_call(tool, {"description": "find it", "prompt": prompt, **more}))


def hanging(streamed: anyio.Event) -> list[Any]:
    """A child's reply that streams some text, sets ``streamed`` and then never ends."""
    return [BlockStart(0, "text"), TextDelta(0, "thinking"), Mark(streamed), Wait(anyio.Event())]


async def test_the_result_is_the_childs_last_assistant_text() -> None:
    async with subagent_rig() as rig:
        rig.route(
            [delegate(), text("The child found it.")],
            [tool_calls(tool_call("echo", {"text": "hi"}), before="Looking."), text("Found it.")],
        )
        rig.main.send("go")
        await rig.main.when_idle()
        assert rig.main.session.turn_end(1) == {"kind": "completed"}
        (result,) = tool_results(rig.main)
        assert (result["content"], result["is_error"]) == ("Found it.", False)
        (run,) = rig.runs
        # A fresh child: it saw the prompt and nothing of the parent's conversation.
        first = next(r for r in rig.model.requests if r.session_id == run.agent.session.id)
        assert first.messages == (Message.user("find the bug"),)
        # Read, then disposed: nothing of it is left.
        assert run.agent.session.turn_end(1) == {"kind": "completed"}
        assert rig.children() == []
        assert rig.root.sessions.get(run.agent.session.id) is None


async def test_a_fork_child_starts_with_the_completed_turns() -> None:
    async with subagent_rig([FORK]) as rig:
        rig.route(
            [text("Hello."), delegate("review it", "subagent_fork"), text("Reviewed.")],
            [text("Looks fine.")],
        )
        rig.main.send("hi")
        rig.main.send("now review")
        await rig.main.when_idle()
        (result,) = tool_results(rig.main)
        assert result["content"] == "Looks fine."
        (run,) = rig.runs
        first = next(r for r in rig.model.requests if r.session_id == run.agent.session.id)
        assert first.messages == (
            Message.user("hi"),
            Message("assistant", (TextBlock("Hello."),)),
            Message.user("review it"),
        )


async def test_the_config_shapes_the_child() -> None:
    config = SPAWN | {
        "persona": "You review code.",
        "model": "small",
        "tool_filter": {"deny": ["echo"]},
        "max_depth": 1,
    }
    async with subagent_rig([config], models=("scripted", "small")) as rig:
        rig.route([delegate(), text("ok")], [text("Reviewed.")])
        rig.main.send("go")
        await rig.main.when_idle()
        parent, child, _ = rig.model.requests
    assert (parent.model, child.model) == ("scripted", "small")
    assert "You review code." in (child.system or "")
    assert "You review code." not in (parent.system or "")
    assert "echo" in [tool.name for tool in parent.tools]
    assert "echo" not in [tool.name for tool in child.tools]


async def test_a_tool_filter_can_keep_only_some_tools() -> None:
    config = SPAWN | {"tool_filter": {"allow": ["echo"]}}
    async with subagent_rig([config]) as rig:
        rig.route([delegate(), text("ok")], [text("Reviewed.")])
        rig.main.send("go")
        await rig.main.when_idle()
        _, child, _ = rig.model.requests
    assert [tool.name for tool in child.tools] == ["echo"]


async def test_a_call_without_background_runs_refuses_run_in_background() -> None:
    async with subagent_rig([SPAWN | {"enable_run_in_background": False}]) as rig:
        rig.route([], [text("Done in the foreground.")])
        done = await rig.call(
            "subagent", {"description": "x", "prompt": "go", "run_in_background": True}
        )
        assert (done.content, done.is_error, done.code) == (
            'invalid arguments: unknown argument "run_in_background" (subagent takes: '
            "description, prompt)",
            True,
            "INVALID_ARGS",
        )
        assert rig.children() == []
        assert rig.model.requests == []  # no child ran


# -- a child that does not complete -----------------------------------------------------------


def refuse_children(agent: Any, *args: Any) -> Any:
    """An ``agent/pre-step`` listener that blocks every agent but ``main``."""
    call_next = args[-1]
    if agent.id != "main":
        raise StepBlocked("no steps for subagents")
    return call_next()


@pytest.mark.parametrize(
    ("child", "content", "code"),
    [
        (
            [failure("rate limited", "RATE_LIMIT")],
            "Error: subagent run failed\nDiagnostic: rate limited (RATE_LIMIT)",
            "SUBAGENT_ERROR",
        ),
        (
            [
                tool_calls(tool_call("echo", {"text": "a"}), before="Half way."),
                failure("rate limited", "RATE_LIMIT"),
            ],
            "Error: subagent run failed\nDiagnostic: rate limited (RATE_LIMIT)\n"
            "Partial output before the run ended:\nHalf way.",
            "SUBAGENT_ERROR",
        ),
        (
            [text("cut sh", finish="max-tokens")],
            "Error: subagent run hit its token limit before finishing\nDiagnostic: max-tokens\n"
            "Partial output before the run ended:\ncut sh",
            "SUBAGENT_MAX_TOKENS",
        ),
    ],
)
async def test_a_child_that_does_not_complete_is_an_error_result(
    child: list[Reply], content: str, code: str
) -> None:
    async with subagent_rig() as rig:
        rig.route([delegate(), text("It failed; moving on.")], child)
        rig.main.send("go")
        await rig.main.when_idle()
        (result,) = tool_results(rig.main)
        assert (result["content"], result["is_error"], result["code"]) == (content, True, code)
        # The parent's turn goes on: it read the error and answered.
        assert rig.main.session.turn_end(1) == {"kind": "completed"}
        assert rig.children() == []


async def test_a_child_that_is_blocked_declined_the_task() -> None:
    async with subagent_rig() as rig:
        rig.root.on("agent/pre-step", refuse_children)
        rig.route([], [])
        done = await rig.call("subagent", {"description": "x", "prompt": "go"})
    assert (done.content, done.code) == (
        "Error: subagent declined the task\nDiagnostic: no steps for subagents",
        "SUBAGENT_REFUSAL",
    )


async def test_a_child_cancelled_on_its_own_was_cancelled_and_keeps_its_partial_text() -> None:
    async with subagent_rig() as rig:
        streamed = anyio.Event()
        rig.route([delegate(), text("ok")], [hanging(streamed)])
        rig.main.send("go")
        await streamed.wait()
        (run,) = rig.runs
        run.agent.cancel()
        await rig.main.when_idle()
        (result,) = tool_results(rig.main)
    assert (result["content"], result["code"]) == (
        "Error: subagent run was cancelled\nDiagnostic: the subagent's turn was cancelled\n"
        "Partial output before the run ended:\nthinking",
        "SUBAGENT_ABORTED",
    )


@pytest.mark.parametrize(
    ("result", "content"),
    [
        (SubagentResult("", "error"), "Error: subagent run failed"),
        (SubagentResult("", "refusal", "no"), "Error: subagent declined the task\nDiagnostic: no"),
        (
            SubagentResult("so far", "aborted"),
            "Error: subagent run was cancelled\nPartial output before the run ended:\nso far",
        ),
    ],
)
def test_failure_leaves_out_what_the_run_does_not_have(
    result: SubagentResult, content: str
) -> None:
    done = failure_result(result)
    assert (done.content, done.is_error) == (content, True)


# -- bad input ------------------------------------------------------------------------------


async def test_an_empty_prompt_is_an_error_result_and_the_turn_goes_on() -> None:
    async with subagent_rig() as rig:
        rig.route([delegate("  "), text("I will ask properly.")])
        rig.main.send("go")
        await rig.main.when_idle()
        (result,) = tool_results(rig.main)
        assert (result["content"], result["code"]) == (
            "Error: invalid prompt: expected a non-empty string",
            "INVALID_ARGS",
        )
        assert rig.main.session.turn_end(1) == {"kind": "completed"}
        assert rig.runs == []
        assert rig.children() == []


async def test_a_tool_filter_naming_unknown_tools_is_an_error_result_leaving_no_child() -> None:
    async with subagent_rig([SPAWN | {"tool_filter": {"allow": ["echo", "nope"]}}]) as rig:
        sessions = rig.root.sessions.list()
        rig.route([delegate(), text("No subagent then.")])
        rig.main.send("go")
        await rig.main.when_idle()
        (result,) = tool_results(rig.main)
        assert (result["content"], result["code"]) == (
            'Error: tools.restrict() names unknown global tool "nope"; known global tools: '
            "echo, list_agents, send_message, subagent",
            "TOOL_RESTRICTION",
        )
        assert rig.main.session.turn_end(1) == {"kind": "completed"}
        assert rig.children() == []
        assert rig.root.sessions.list() == sessions


async def test_max_depth_stops_delegation_that_nests_too_deep() -> None:
    async with subagent_rig([SPAWN | {"max_depth": 1}]) as rig:
        rig.route(
            [delegate(), text("Done.")],
            [delegate("go deeper"), text("I could not delegate.")],
        )
        rig.main.send("go")
        await rig.main.when_idle()
        (result,) = tool_results(rig.main)
        assert result["content"] == "I could not delegate."
        (run,) = rig.runs
        (nested,) = tool_results(run.agent)
    assert (nested["content"], nested["code"]) == (
        "Error: subagent depth 2 exceeds maxDepth 1",
        "SUBAGENT_DEPTH",
    )


async def test_max_depth_zero_allows_no_subagent() -> None:
    async with subagent_rig([SPAWN | {"max_depth": 0}]) as rig:
        done = await rig.call("subagent", {"description": "x", "prompt": "go"})
    assert (done.content, done.code) == (
        "Error: subagent depth 1 exceeds maxDepth 0",
        "SUBAGENT_DEPTH",
    )


async def test_a_capability_the_provider_lacks_is_an_error_result() -> None:
    async with subagent_rig([SPAWN | {"persona": "p"}], providers=()) as rig:
        rig.root.subagents.register_provider(Provider(capabilities=("depth_limit",)))
        done = await rig.call("subagent", {"description": "x", "prompt": "go"})
    assert (done.content, done.code) == (
        'Error: subagent provider "spawn" does not support the "persona" capability',
        "UNSUPPORTED_CAPABILITY",
    )


async def test_a_call_without_an_agent_is_refused() -> None:
    async with subagent_rig() as rig:
        done = await rig.root.tools.execute(
            "subagent", {"description": "x", "prompt": "go"}, ToolCall("t")
        )
    assert (done.content, done.is_error, done.code) == (
        "Error: the subagent tool needs a calling agent",
        True,
        "INVALID_ARGS",
    )


# -- cancellation -----------------------------------------------------------------------------


async def test_cancelling_the_parents_turn_cancels_and_awaits_the_child() -> None:
    async with subagent_rig() as rig:
        streamed = anyio.Event()
        rig.route([delegate()], [hanging(streamed)])
        rig.main.send("go")
        await streamed.wait()
        (run,) = rig.runs
        rig.main.cancel()
        await rig.main.when_idle()
        # By the time the parent's turn has ended, the child is gone.
        assert rig.children() == []
        assert rig.root.sessions.get(run.agent.session.id) is None
        assert run.agent.session.turn_end(1) == {"kind": "aborted", "reason": "disposed"}
        assert rig.main.session.turn_end(1) == {"kind": "aborted", "reason": "user"}
        (result,) = tool_results(rig.main)
        assert (result["content"], result["code"]) == ("Error: tool call aborted", "ABORTED")
        assert (await run.result).stop_reason == "aborted"
