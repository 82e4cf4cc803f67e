"""Children started, answered and disposed one after another on a scripted model leave
no agent, session, task, fiber or listener behind: the runtime is back where it was
after each of them, so a leak shows at the cycle that makes it, not after thousands."""

from __future__ import annotations

import anyio
import pytest

from tests.plugins.subagent_support import Rig, subagent_runtime

pytestmark = pytest.mark.anyio

CYCLES = 200


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


async def test_no_agent_or_task_is_left_after_each_of_two_hundred_spawn_dispose_cycles() -> None:
    async with subagent_runtime(respond=lambda request: "done") as rig:
        before = footprint(rig)
        for cycle in range(CYCLES):
            run = await rig.start()
            result = await run.result
            await run.agent.dispose()
            assert result.stop_reason == "completed"
            await rig.root.settle()
            assert footprint(rig) == before, f"after cycle {cycle}"
        assert len(rig.model.requests) == CYCLES  # every child ran its turn
