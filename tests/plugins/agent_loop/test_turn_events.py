"""``agent/turn-start`` and ``agent/turn-end`` (RFC 0042): a turn's start and end for
observers, emitted only when heard."""

from __future__ import annotations

from typing import Any

import pytest

from dsh import Context
from dsh.testing import ScriptedModel, capture_logs, errors_logged, failure, run_turn
from dsh_agent_core import AgentCore

pytestmark = pytest.mark.anyio


async def test_each_turn_is_heard_starting_and_ending_with_its_reason() -> None:
    heard: list[tuple[Any, ...]] = []
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        ScriptedModel("hi", failure("down", "SERVER_ERROR"), models=["m"]).install(root)
        agent = root.agents.get("main")
        root.on("agent/turn-start", lambda a, turn: heard.append(("start", a, turn)))
        root.on("agent/turn-end", lambda a, turn, reason: heard.append(("end", a, turn, reason)))
        await run_turn(agent, "one")
        await run_turn(agent, "two")
    assert heard == [
        ("start", agent, 1),
        ("end", agent, 1, {"kind": "completed"}),
        ("start", agent, 2),
        ("end", agent, 2, {"kind": "error", "message": "down", "code": "SERVER_ERROR"}),
    ]


async def test_a_failing_listener_is_logged_and_the_turn_goes_on() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        ScriptedModel("hi", models=["m"]).install(root)

        def broken(*args: Any) -> None:
            raise RuntimeError("observer broke")

        root.on("agent/turn-start", broken)
        root.on("agent/turn-end", broken)
        with capture_logs() as logs:
            assert await run_turn(root.agents.get("main"), "go") == {"kind": "completed"}
    assert [r.getMessage() for r in errors_logged(logs)] == [
        "a listener of agent/turn-start failed for agent 'main'",
        "a listener of agent/turn-end failed for agent 'main'",
    ]
