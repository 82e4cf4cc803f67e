"""``dsh.testing``: the kit plugin authors test with keeps its promises."""

from __future__ import annotations

import logging

import pytest

from dsh import Context, testing
from dsh_agent_core import AgentCore
from dsh_llm import BlockEnd, BlockStart, Finish, LlmFailure, ToolCallDelta, Usage, UsageChunk

pytestmark = pytest.mark.anyio


async def test_until_gives_up_after_its_limit() -> None:
    with pytest.raises(AssertionError, match=r"never became true \(3 checkpoints\)"):
        await testing.until(lambda: False, limit=3)
    ticks = 0

    def soon() -> bool:
        nonlocal ticks
        ticks += 1
        return ticks > 2

    await testing.until(soon, limit=3)
    assert ticks == 3


def test_capture_logs_sees_records_however_logging_is_configured() -> None:
    logger = logging.getLogger("dsh.kit-probe")
    logger.propagate = False
    try:
        with testing.capture_logs("dsh.kit-probe", logging.INFO) as logs:
            logger.debug("not captured: below the level")
            logger.info("one %s", "info")
            logger.error("an error")
        logger.error("not captured: after the block")
    finally:
        logger.propagate = True
    assert logs.messages() == ["one info", "an error"]
    assert logs.messages(logging.ERROR) == ["an error"]
    assert [r.getMessage() for r in testing.errors_logged(logs)] == ["an error"]


def test_reply_builders() -> None:
    reply = testing.tool_calls(
        testing.tool_call("a", {"x": 1}), testing.tool_call("b", "{}", id="fixed"), usage=(3, 4)
    )

    class Request:
        turn, step = 2, 5

    assert reply(Request) == [
        BlockStart(0, "tool-call"),
        ToolCallDelta(0, "call-2-5-1", '{"x": 1}', name="a"),
        BlockEnd(0),
        BlockStart(1, "tool-call"),
        ToolCallDelta(1, "fixed", "{}", name="b"),
        BlockEnd(1),
        UsageChunk(Usage(3, 4)),
        Finish("tool-calls"),
    ]
    assert testing.failure("down", "SERVER_ERROR") == [
        Finish("error", LlmFailure("down", "SERVER_ERROR"))
    ]
    assert testing.failure("stop", "ABORTED", aborted=True)[0].reason == "aborted"
    assert testing.text("a", "b", finish="max-tokens")[-1] == Finish("max-tokens")


async def test_a_call_beyond_the_script_fails_the_turn_naming_it() -> None:
    model = testing.ScriptedModel("only one answer")
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        agent = root.agents.get("main")
        assert await testing.run_turn(agent, "one") == {"kind": "completed"}
        reason = await testing.run_turn(agent, "two")
    assert reason is not None
    assert reason["code"] == "ADAPTER_ERROR"
    assert "unscripted model call: turn 2, step 1" in reason["message"]


async def test_respond_answers_when_the_script_is_empty() -> None:
    def respond(request: object) -> str:
        return "from respond"

    model = testing.ScriptedModel(respond=respond, models=["m"])
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        model.install(root)
        agent = root.agents.get("main")
        assert await testing.run_turn(agent, "hi") == {"kind": "completed"}
        assert agent.session.derive_messages()[-1].text == "from respond"
