"""``agent/request-failed``: a listener that fixed the cause of a refused request gets
the turn one retry, in a new step."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from dsh import Context
from dsh.testing import ScriptedModel, failure, run_turn
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_llm import Finish, LlmFailure, LlmRequest, TextDelta
from tests.support import ANSWERED_STEP, event_types

pytestmark = pytest.mark.anyio

Seen = list[tuple[str, int | None, str]]


@asynccontextmanager
async def answering(answer: Any) -> AsyncIterator[tuple[Context, ScriptedModel, Seen]]:
    """agent-core on a scripted model, with an ``agent/request-failed`` listener that
    notes each call (agent id, step, failure code) and answers ``answer``."""
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        model = ScriptedModel(models=["m"])
        model.install(root)
        seen: Seen = []

        def failed(agent: Agent, request: LlmRequest, problem: LlmFailure) -> Any:
            seen.append((agent.id, request.step, problem.code))
            return answer

        root.on("agent/request-failed", failed)
        yield root, model, seen


async def test_a_listener_answering_true_gets_one_retry_in_a_new_step() -> None:
    async with answering(True) as (root, model, seen):
        agent = root.agents.get("main")
        model.reply(failure("refused", "CONTEXT_LENGTH"), "fine")
        assert await run_turn(agent, "hi") == {"kind": "completed"}
        assert seen == [("main", 1, "CONTEXT_LENGTH")]
        assert [r.step for r in model.requests] == [1, 2]
        # The retry sends the same history: the user's message is logged once.
        assert model.requests[0].messages == model.requests[1].messages
        kinds = [k for k in event_types(agent.session) if k != "assistant/chunk"]
        assert kinds == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "step/end",
            *ANSWERED_STEP,
            "turn/end",
        ]


async def test_the_retry_failing_too_fails_the_turn_without_asking_again() -> None:
    async with answering(True) as (root, model, seen):
        agent = root.agents.get("main")
        model.reply(failure("refused", "X"), failure("refused again", "Y"))
        reason = await run_turn(agent, "hi")
        assert reason == {"kind": "error", "message": "refused again", "code": "Y"}
        assert seen == [("main", 1, "X")]
        # A later failure, after a step that went through, may be retried again.
        model.reply(failure("refused", "X"), "ok", failure("refused", "X"), "ok")
        assert await run_turn(agent, "next") == {"kind": "completed"}
        assert await run_turn(agent, "more") == {"kind": "completed"}
        assert [s[1] for s in seen] == [1, 1, 1]


@pytest.mark.parametrize("answer", [None, False, 1, "yes"])
async def test_anything_but_true_fails_the_turn(answer: Any) -> None:
    async with answering(answer) as (root, model, seen):
        model.reply(failure("refused", "CONTEXT_LENGTH"))
        reason = await run_turn(root.agents.get("main"), "hi")
        assert reason == {"kind": "error", "message": "refused", "code": "CONTEXT_LENGTH"}
        assert len(seen) == 1
        assert len(model.requests) == 1


async def test_a_failure_after_visible_output_is_not_offered_for_a_retry() -> None:
    async with answering(True) as (root, model, seen):
        broken = [TextDelta(0, "partial"), Finish("error", LlmFailure("dropped", "NETWORK"))]
        model.reply(broken)
        reason = await run_turn(root.agents.get("main"), "hi")
        assert reason == {"kind": "error", "message": "dropped", "code": "NETWORK"}
        assert seen == []
        # Whitespace alone is nothing visible: that failure is offered.
        model.reply([TextDelta(0, " \n"), *failure("refused", "X")], "ok")
        assert await run_turn(root.agents.get("main"), "again") == {"kind": "completed"}
        assert seen == [("main", 1, "X")]
