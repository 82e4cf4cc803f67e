"""Turn limits: ``max_steps`` and ``max_turn_tokens`` end a turn that would go on, after
its last step's tool results, with ``MAX_STEPS`` or ``USAGE_LIMIT`` (RFC 0031)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel

from dsh import ConfigError, Context
from dsh.testing import ScriptedModel, failure, run_turn, text, tool_call, tool_calls
from dsh_agent import AgentArgumentError
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent, MaxStepsError, UsageLimitError
from dsh_agent_loop._limits import check_turn_limits, turn_tokens
from dsh_llm import LlmRequest, Usage
from dsh_tools import Tool, ToolCall
from tests.plugins.session_store.store_support import STORES
from tests.plugins.subagent_support import subagent_runtime
from tests.support import event_data, event_types

pytestmark = pytest.mark.anyio

COMPLETED = {"kind": "completed"}


def max_steps(n: int) -> dict[str, str]:
    return {
        "kind": "error",
        "code": "MAX_STEPS",
        "message": f"the turn reached its limit of {n} steps",
    }


class Args(BaseModel):
    text: str = ""


async def echo(args: Args, call: ToolCall) -> str:
    return args.text


def forever(usage: tuple[int, ...] | None = None) -> Any:
    """A model that calls ``echo`` at every step (optionally reporting ``usage``)."""
    return tool_calls(tool_call("echo", {"text": "again"}), usage=usage)


@asynccontextmanager
async def core(
    model: ScriptedModel | None = None, **config: Any
) -> AsyncIterator[tuple[Context, ScriptedModel, LoopAgent]]:
    """agent-core with agent ``main`` on scripted model ``m`` and an ``echo`` tool."""
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m", **config})
        scripted = model or ScriptedModel(models=["m"])
        scripted.install(root)
        root.tools.register(Tool(name="echo", description="echo", parameters=Args, execute=echo))
        yield root, scripted, cast("LoopAgent", root.agents.get("main"))


def kinds(agent: LoopAgent) -> list[str]:
    skipped = ("assistant/chunk", "request/header")
    return [k for k in event_types(agent.session) if k not in skipped]


# -- max_steps -------------------------------------------------------------------------------


async def test_a_model_calling_tools_forever_stops_at_max_steps() -> None:
    model = ScriptedModel(respond=forever(), models=["m"])
    async with core(model, max_steps=3) as (root, _, agent):
        errors: list[BaseException] = []
        root.on("agent/error", lambda agent, turn, step, error: errors.append(error))
        assert agent.max_steps == 3
        assert await run_turn(agent, "go") == max_steps(3)
        assert [r.step for r in model.requests] == [1, 2, 3]
        # Every step's tool results are recorded, the last one's too, then the end.
        assert [r["step"] for r in event_data(agent.session, "tool/result")] == [1, 2, 3]
        assert kinds(agent)[-4:] == ["tool/call", "tool/result", "step/end", "turn/end"]
        [error] = errors
        assert isinstance(error, MaxStepsError)
        assert error.code == "MAX_STEPS"


async def test_the_default_is_fifty_steps() -> None:
    model = ScriptedModel(respond=forever(), models=["m"])
    async with core(model) as (_, _, agent):
        assert (agent.max_steps, agent.max_turn_tokens) == (50, None)
        assert await run_turn(agent, "go") == max_steps(50)
        assert len(model.requests) == 50


async def test_a_turn_that_ends_at_its_last_allowed_step_completes() -> None:
    async with core(max_steps=2) as (_, model, agent):
        model.reply(forever(), "done")
        assert await run_turn(agent, "go") == COMPLETED


async def test_the_limit_counts_the_steps_of_each_turn_anew() -> None:
    async with core(max_steps=3, max_turn_tokens=25) as (_, model, agent):
        model.reply(forever((10, 2)), forever((10, 2)), forever((10, 2)))
        assert await run_turn(agent, "one") == max_steps(3)  # 36 tokens, 3 steps
        # Neither the steps nor the tokens of turn one count here.
        model.reply(forever((10, 2)), forever((10, 3)))
        assert await run_turn(agent, "two") == {
            "kind": "error",
            "code": "USAGE_LIMIT",
            "message": "the turn reached its limit of 25 tokens (used 25)",
        }
        model.reply(forever((10, 2)), text("done", usage=(10, 2)))
        assert await run_turn(agent, "three") == COMPLETED
        assert len(model.requests) == 7


async def test_a_retried_request_is_a_step_too() -> None:
    async with core(max_steps=1) as (root, model, agent):
        root.on("agent/request-failed", lambda agent, request, problem: True)
        model.reply(failure("too long", "CONTEXT_LENGTH"))
        assert await run_turn(agent, "go") == max_steps(1)
        assert len(model.requests) == 1


async def test_steering_left_at_the_limit_becomes_the_next_turn() -> None:
    async with core(max_steps=1) as (root, model, agent):

        async def steer(args: Args, call: ToolCall) -> str:
            agent.steer("and then this")
            return "steered"

        root.tools.register(Tool(name="steer", description="s", parameters=Args, execute=steer))
        model.reply(tool_calls(tool_call("steer")), "the steered turn")
        agent.send("go")
        await agent.when_idle()
        ends = [e["reason"] for e in event_data(agent.session, "turn/end")]
        assert ends == [max_steps(1), COMPLETED]
        assert model.requests[1].messages[-1].text == "and then this"


# -- max_turn_tokens ------------------------------------------------------------------------


async def test_max_turn_tokens_counts_the_reported_usage_of_the_turns_steps() -> None:
    model = ScriptedModel(respond=forever((10, 2, 3)), models=["m"])
    async with core(model, max_turn_tokens=40) as (_, _, agent):
        # 15 tokens a step: 30 after two steps, 45 after three.
        assert await run_turn(agent, "go") == {
            "kind": "error",
            "code": "USAGE_LIMIT",
            "message": "the turn reached its limit of 40 tokens (used 45)",
        }
        assert len(model.requests) == 3
        assert [r["step"] for r in event_data(agent.session, "tool/result")] == [1, 2, 3]


async def test_max_turn_tokens_counts_estimated_usage() -> None:
    model = ScriptedModel(respond=forever(), models=["m"])
    async with core(model, max_turn_tokens=1) as (root, _, agent):
        errors: list[BaseException] = []
        root.on("agent/error", lambda agent, turn, step, error: errors.append(error))
        reason = await run_turn(agent, "go")
        [usage] = event_data(agent.session, "usage/step")
        assert usage["estimated"] is True
        used = turn_tokens(Usage.from_json(usage["usage"]))
        assert reason == {
            "kind": "error",
            "code": "USAGE_LIMIT",
            "message": f"the turn reached its limit of 1 tokens (used {used})",
        }
        assert isinstance(errors[0], UsageLimitError)


def test_the_step_limit_is_looked_at_first() -> None:
    checked = LoopAgent.__new__(LoopAgent)
    checked.max_steps, checked.max_turn_tokens = 2, 10
    check_turn_limits(checked, 1, 9)
    with pytest.raises(UsageLimitError):
        check_turn_limits(checked, 1, 10)
    with pytest.raises(MaxStepsError):
        check_turn_limits(checked, 2, 10)


# -- where limits come from -----------------------------------------------------------------


async def test_a_declared_agent_may_set_its_own_limits() -> None:
    agents = [{"id": "main"}, {"id": "tight", "max_steps": 2, "max_turn_tokens": 99}]
    async with core(agents=agents, max_steps=7, max_turn_tokens=1000) as (root, _, agent):
        tight = cast("LoopAgent", root.agents.get("tight"))
        assert (agent.max_steps, agent.max_turn_tokens) == (7, 1000)
        assert (tight.max_steps, tight.max_turn_tokens) == (2, 99)
        made = agent._loop.create_agent(
            root, id="made", model="m", cwd=None, persona=None, session=None, max_steps=4
        )
        assert (made.max_steps, made.max_turn_tokens) == (4, 1000)
        assert cast("LoopAgent", root.agents.create("plain")).max_steps == 7


async def test_an_agent_made_in_another_agents_scope_inherits_its_limits() -> None:
    agents = [{"id": "main", "max_steps": 2, "max_turn_tokens": 500}]
    async with subagent_runtime(core={"agents": agents}) as rig:
        rig.model.respond = forever()
        run = await rig.start()
        child = run.agent
        assert (child.max_steps, child.max_turn_tokens) == (2, 500)
        result = await run.result
        assert result.stop_reason == "error"
        assert result.diagnostic == "the turn reached its limit of 2 steps (MAX_STEPS)"
        assert len(rig.requests_of(child.session)) == 2
        # Outside any agent's scope: the loop's limits.
        assert rig.root.agents.create("apart").max_steps == 50


@pytest.mark.parametrize("name", ["max_steps", "max_turn_tokens"])
@pytest.mark.parametrize("value", [0, -1, True, 2.5])
async def test_a_limit_that_is_not_a_positive_integer_is_refused(name: str, value: Any) -> None:
    async with core() as (root, _, agent):
        with pytest.raises(AgentArgumentError, match=f'agent "x": {name} must be a positive'):
            agent._loop.create_agent(
                root, id="x", model="m", cwd=None, persona=None, session=None, **{name: value}
            )
        assert root.agents.get("x") is None


@pytest.mark.parametrize(
    "config",
    [{"max_steps": 0}, {"max_turn_tokens": 0}, {"agents": [{"id": "a", "max_steps": 0}]}],
)
async def test_a_bad_limit_in_the_config_fails_the_plugin(config: dict[str, Any]) -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match="greater than 0"):
            await root.plugin(AgentCore, {"model": "m", **config})


# -- the history and a resume ---------------------------------------------------------------


async def test_the_history_keeps_a_limited_turn() -> None:
    async with core(max_steps=2) as (_, model, agent):
        model.reply(forever(), forever(), "second answer")
        assert await run_turn(agent, "one") == max_steps(2)
        assert await run_turn(agent, "two") == COMPLETED
        sent = model.requests[2].messages
        assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "tool", "user"]
        assert sent[-1].text == "two"


@pytest.mark.parametrize("backend", sorted(STORES))
async def test_a_session_resumes_after_a_limited_turn(backend: str, tmp_path: Path) -> None:
    store = STORES[backend](tmp_path / "store")
    async with core(max_steps=1) as (root, model, agent):
        await store.start(root)
        model.reply(forever())
        assert await run_turn(agent, "one") == max_steps(1)
        session_id = agent.session.id
    async with core(max_steps=1) as (root, model, _):
        await store.start(root)
        resumed = cast("LoopAgent", await root.agents.resume(session_id))
        assert resumed.max_steps == 1
        model.reply("resumed answer")
        assert await run_turn(resumed, "two") == COMPLETED
        request: LlmRequest = model.requests[0]
        assert [m.role for m in request.messages] == ["user", "assistant", "tool", "user"]
        assert request.messages[-1].text == "two"


def test_the_turn_count_includes_the_whole_prompt() -> None:
    assert turn_tokens(Usage(10, 5, 100, 20, 3)) == 135
    assert turn_tokens(Usage(1, 2)) == 3
