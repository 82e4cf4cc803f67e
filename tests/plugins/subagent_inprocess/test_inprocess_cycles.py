"""Ten thousand children started, answered and disposed on a scripted model leave no
agent, session, task, fiber or listener behind."""

from __future__ import annotations

import anyio
import pytest

from tests.plugins.subagent_support import Rig, subagent_runtime

pytestmark = pytest.mark.anyio

CYCLES = 10_000


def footprint(rig: Rig) -> dict[str, object]:
    """What a child adds to the runtime while it lives."""
    root = rig.root
    return {
        "agents": [a.id for a in root.agents.list()],
        "sessions": [s.id for s in root.sessions.list()],
        "tasks": len(anyio.get_running_tasks()),
        "parent effects": len(rig.parent.ctx.fiber._effects),
        "plugin specs": len(root.fiber.runtime.plugin_specs),
        "listeners": {
            name: len(root.events.event(name).listeners())
            for name in ("agent/pre-step", "agent/status", "subagent/end")
        },
    }


# Ten thousand whole agent lifetimes take tens of seconds, several times that under
# coverage's tracer on a loaded machine: more than the suite's default per-test limit.
@pytest.mark.timeout(900)
async def test_no_agent_or_task_is_left_after_ten_thousand_spawn_dispose_cycles() -> None:
    async with subagent_runtime(respond=lambda request: "done") as rig:
        before = footprint(rig)
        for _ in range(CYCLES):
            run = await rig.start()
            result = await run.result
            await run.agent.dispose()
            assert result.stop_reason == "completed"
        await rig.root.settle()
        assert len(rig.model.requests) == CYCLES  # every child ran its turn
        assert footprint(rig) == before
