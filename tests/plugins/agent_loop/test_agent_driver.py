"""The driver is a plain task of the runtime: what escapes it is logged, not raised
into the runtime's task group, and the agent can still be disposed."""

from __future__ import annotations

import logging

import anyio
import pytest

from dsh import Context, InactiveContextError
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent

pytestmark = pytest.mark.anyio


async def test_a_driver_that_fails_is_logged_and_the_agent_still_disposes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        agent: LoopAgent = root.agents.get("main")
        started = anyio.Event()

        async def broken() -> None:
            started.set()
            raise RuntimeError("a bug of the loop's own")

        monkeypatch.setattr(agent, "drive", broken)
        with caplog.at_level(logging.ERROR, logger="dsh.agent-loop"):
            agent.send("hi")
            driver = agent._driver
            assert driver is not None
            await started.wait()
            await driver.wait()
        (record,) = [rec for rec in caplog.records if rec.name == "dsh.agent-loop"]
        assert record.getMessage() == "the driver of agent 'main' failed"
        assert isinstance(record.exc_info and record.exc_info[1], RuntimeError)
        await agent.dispose()  # its ended driver is waited for at once
        assert root.agents.get("main") is None


async def test_the_driver_task_is_named_after_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        agent: LoopAgent = root.agents.get("main")
        names: list[str | None] = []

        async def record_name() -> None:
            names.append(anyio.get_current_task().name)

        monkeypatch.setattr(agent, "drive", record_name)
        agent.send("hi")
        driver = agent._driver
        assert driver is not None
        await driver.wait()
        assert names == ["dsh agent main"]


async def test_a_message_refused_by_a_closing_scope_is_not_queued(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        agent: LoopAgent = root.agents.get("main")
        refused: list[BaseException] = []

        def send_late() -> None:
            # Undone before the agent's close: its scope takes no new effects by now.
            try:
                agent.send("too late")
            except InactiveContextError as exc:
                refused.append(exc)

        agent.ctx.effect(lambda: send_late)
        await agent.ctx.fiber.dispose()  # the scope's undo, not ``agent.dispose()``
        assert len(refused) == 1
        assert agent._inbox == []
        assert agent._driver is None
        await agent.when_idle()  # nothing is queued: it returns at once
