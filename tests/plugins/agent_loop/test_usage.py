"""Usage: the ``usage/step`` event, ``agent.usage``, the price table and the line a
terminal prints; persisted and resumed by each store."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel

from dsh import ConfigError, Context
from dsh.testing import ScriptedModel, run_turn, text, tool_call, tool_calls
from dsh_agent import AgentRegistry
from dsh_agent_core import AgentCore
from dsh_agent_loop import (
    NO_USAGE,
    USAGE_EVENT,
    AgentLoop,
    LoopAgent,
    Price,
    add_usage,
    cost,
    format_usage,
    session_usage,
    turn_usage,
)
from dsh_agent_loop._usage import estimate_usage
from dsh_llm import (
    Finish,
    Llm,
    LlmRequest,
    Message,
    TextBlock,
    TextDelta,
    Usage,
    UsageChunk,
)
from dsh_session import Session, SessionHeader, Sessions
from dsh_system_prompt import SystemPrompt, ToolSchema
from dsh_tools import Tool, ToolCall, Tools
from tests.plugins.session_store.store_support import STORES
from tests.support import event_data, event_types

pytestmark = pytest.mark.anyio

COMPLETED = {"kind": "completed"}


class Args(BaseModel):
    text: str = ""


async def echo(args: Args, call: ToolCall) -> str:
    return args.text


@asynccontextmanager
async def core(**config: Any) -> AsyncIterator[tuple[Context, ScriptedModel, LoopAgent]]:
    """agent-core with agent ``main`` on a scripted model ``m`` and an ``echo`` tool."""
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m", **config})
        model = ScriptedModel(models=["m"])
        model.install(root)
        root.tools.register(Tool(name="echo", description="echo", parameters=Args, execute=echo))
        yield root, model, cast("LoopAgent", root.agents.get("main"))


async def test_each_step_records_its_usage_after_its_assistant_message() -> None:
    async with core() as (_, model, agent):
        model.reply(
            tool_calls(tool_call("echo", {"text": "hi"}), usage=(10, 2, 5)),
            text("done", usage=(20, 3, None, 4, 1)),
            text("no usage"),
        )
        assert await run_turn(agent, "go") == COMPLETED
        assert await run_turn(agent, "again") == COMPLETED
        session = agent.session
        kinds = [k for k in event_types(session) if k != "assistant/chunk"]
        assert kinds[4:8] == ["assistant/message", USAGE_EVENT, "tool/call", "tool/result"]
        assert event_data(session, USAGE_EVENT)[:2] == [
            {
                "turn": 1,
                "step": 1,
                "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 5},
            },
            {
                "turn": 1,
                "step": 2,
                "usage": {
                    "input_tokens": 20,
                    "output_tokens": 3,
                    "cache_write_tokens": 4,
                    "reasoning_tokens": 1,
                },
            },
        ]
        # The assistant message keeps its usage too (a reported one only).
        answers = event_data(session, "assistant/message")
        assert answers[1]["usage"]["input_tokens"] == 20
        assert "usage" not in answers[2]
        # The step without usage gets an estimate, marked as one.
        assert event_data(session, USAGE_EVENT)[2]["estimated"] is True
        guess = add_usage(NO_USAGE, Usage.from_json(event_data(session, USAGE_EVENT)[2]["usage"]))
        assert guess.input_tokens > 0
        # Absent fields count 0; the estimate counts, and is told apart.
        reported = Usage(30, 5, 5, 4, 1)
        assert agent.usage == add_usage(reported, guess)
        assert agent.estimated_usage == guess
        assert agent.usage == session_usage(session)
        assert session_usage(session, estimated=False) == reported
        assert session_usage(session, estimated=True) == guess
        assert turn_usage(session, 1) == reported
        assert turn_usage(session, 1, estimated=True) == NO_USAGE
        assert turn_usage(session, 2) == guess
        assert turn_usage(session, 2, estimated=False) == NO_USAGE
        assert turn_usage(session, 3) == NO_USAGE


def test_an_estimate_counts_the_utf8_bytes_of_the_request_and_the_answer() -> None:
    schema = ToolSchema("echo", "Echo.", {"type": "object"})
    request = LlmRequest(
        model="m", messages=(Message.user("héllo"),), system="Be brief.", tools=(schema,)
    )
    # What the model reads: the system prompt, each message and each tool as compact JSON.
    read = (
        'Be brief.{"role":"user","content":[{"type":"text","text":"héllo"}]}'
        '{"name":"echo","description":"Echo.","parameters":{"type":"object"}}'
    )
    answer = Message("assistant", (TextBlock("ok ✓"),))
    said = '{"role":"assistant","content":[{"type":"text","text":"ok ✓"}]}'
    # é is 2 bytes and ✓ 3: bytes, not characters, divided by 4 and rounded up.
    expected = Usage(-(-len(read.encode()) // 4), -(-len(said.encode()) // 4))
    assert estimate_usage(request, answer) == expected
    assert len(read.encode()) == len(read) + 1
    bare = LlmRequest(model="m", messages=())
    assert estimate_usage(bare, Message("assistant", ())) == Usage(
        0, -(-len('{"role":"assistant","content":[]}') // 4)
    )


async def test_the_estimate_is_of_the_request_the_model_was_sent() -> None:
    async with core() as (root, model, agent):

        async def longer(agent: Any, request: LlmRequest, call_next: Any) -> LlmRequest:
            sent: LlmRequest = await call_next()
            return dataclasses.replace(sent, system="x" * 4000)

        root.on("agent/request", longer)
        model.reply("no usage here")
        assert await run_turn(agent, "go") == COMPLETED
        [data] = event_data(agent.session, USAGE_EVENT)
        answer = agent.session.history()[-1]
        assert data == {
            "turn": 1,
            "step": 1,
            "usage": estimate_usage(model.requests[0], answer).to_json(),
            "estimated": True,
        }
        assert data["usage"]["input_tokens"] > 1000
        assert agent.estimated_usage == agent.usage


async def test_the_last_usage_chunk_of_a_stream_is_the_steps_usage() -> None:
    async with core() as (_, model, agent):
        model.reply(
            [TextDelta(0, "hi"), UsageChunk(Usage(1, 1)), UsageChunk(Usage(7, 3)), Finish("stop")]
        )
        assert await run_turn(agent, "go") == COMPLETED
        (data,) = event_data(agent.session, USAGE_EVENT)
        assert data["usage"] == {"input_tokens": 7, "output_tokens": 3}
        assert agent.usage == Usage(7, 3, 0, 0, 0)


async def test_turn_usage_counts_only_that_turn() -> None:
    async with core() as (_, model, agent):
        model.reply(text("a", usage=(1, 1)), text("b", usage=(10, 10)), text("c", usage=(5, 5)))
        for message in ("one", "two", "three"):
            assert await run_turn(agent, message) == COMPLETED
        assert turn_usage(agent.session, 2) == Usage(10, 10, 0, 0, 0)
        assert agent.usage == Usage(16, 16, 0, 0, 0)


@pytest.mark.parametrize("backend", sorted(STORES))
async def test_usage_is_persisted_and_resumed(backend: str, tmp_path: Path) -> None:
    store = STORES[backend](tmp_path / "store")
    async with core() as (root, model, agent):
        await store.start(root)
        model.reply(text("a", usage=(3, 4, 5)), text("b", usage=(30, 40)))
        assert await run_turn(agent, "one") == COMPLETED
        assert await run_turn(agent, "two") == COMPLETED
        session_id = agent.session.id
        total = agent.usage
    stored = [r for r in store.records(session_id) if r["type"] == USAGE_EVENT]
    assert [r["data"]["usage"]["input_tokens"] for r in stored] == [3, 30]
    async with core() as (root, model, _):
        await store.start(root)
        resumed = cast("LoopAgent", await root.agents.resume(session_id))
        assert resumed.usage == total == Usage(33, 44, 5, 0, 0)
        model.reply(text("c", usage=(1, 1)), "d")
        assert await run_turn(resumed, "three") == COMPLETED
        assert resumed.usage == Usage(34, 45, 5, 0, 0)
        assert await run_turn(resumed, "four") == COMPLETED
        guess = resumed.estimated_usage
        assert guess.input_tokens > 0
        session_id = resumed.session.id
    async with core() as (root, model, _):
        await store.start(root)
        again = cast("LoopAgent", await root.agents.resume(session_id))
        assert again.estimated_usage == guess
        assert again.usage == add_usage(Usage(34, 45, 5, 0, 0), guess)


async def test_the_loop_declares_the_event_type_while_it_runs() -> None:
    async with Context() as root:
        for plugin in (SystemPrompt, Llm, Sessions, AgentRegistry, Tools):
            await root.plugin(plugin)
        before = root.sessions.event_types()
        loop = await root.plugin(AgentLoop)
        assert root.sessions.event_types() == before | {USAGE_EVENT}
        await loop.dispose()
        assert root.sessions.event_types() == before


# -- prices ----------------------------------------------------------------------------------


async def test_the_price_table_turns_tokens_into_cost() -> None:
    prices = {"m": {"input": 2.0, "output": 8.0, "cache_read": 0.5}}
    async with core(prices=prices) as (root, model, agent):
        assert agent.cost() == 0.0
        model.reply(text("a", usage=(1_000_000, 500_000, 2_000_000, 1_000_000)))
        assert await run_turn(agent, "go") == COMPLETED
        # 2 (input) + 4 (output) + 1 (cache read at 0.5) + 2 (cache write at the input price)
        assert agent.cost() == 9.0
        assert agent.cost(Usage(500_000, 0)) == 1.0
        other = cast("LoopAgent", root.agents.create("other", model="unpriced"))
        assert other.cost() is None
        bare = cast("LoopAgent", root.agents.create("bare", model=None))
        assert bare.cost(Usage(1, 1)) is None


def test_cost_prices_each_kind_of_token() -> None:
    table = {"m": Price(input=1, output=2, cache_read=0.25, cache_write=1.5)}
    usage = Usage(1_000_000, 1_000_000, 4_000_000, 2_000_000, 999)
    assert cost(usage, table, "m") == 1 + 2 + 1 + 3
    assert cost(usage, table, "x") is None
    assert cost(usage, table, None) is None
    assert cost(Usage(0, 0), table, "m") == 0.0


@pytest.mark.parametrize(
    ("prices", "problem"),
    [
        ({"m": {"input": -1, "output": 1}}, "greater than or equal to 0"),
        ({"m": {"input": 1}}, "Field required (at prices.m.output)"),
        ({"m": {"input": 1, "output": 1, "cache": 1}}, "Extra inputs are not permitted"),
    ],
    ids=["negative", "missing", "unknown"],
)
async def test_a_bad_price_table_fails_the_plugin(prices: Any, problem: str) -> None:
    async with Context() as root:
        with pytest.raises(ConfigError) as caught:
            await root.plugin(AgentCore, {"model": "m", "prices": prices})
        assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("usage", "spent", "line"),
    [
        (Usage(1234, 56), None, "1,234 in · 56 out"),
        (Usage(1234, 56), 0.00123, "1,234 in · 56 out · $0.0012"),
        (Usage(10, 2, 1000, 0, 0), 12.345, "10 in · 1,000 cached · 2 out · $12.35"),
        (
            Usage(10, 20, None, 300, 15),
            0.0,
            "10 in · 300 cache write · 20 out · 15 reasoning · $0.0000",
        ),
        (NO_USAGE, None, "0 in · 0 out"),
    ],
)
def test_format_usage_is_one_line(usage: Usage, spent: float | None, line: str) -> None:
    assert format_usage(usage, spent) == line


def test_session_usage_of_a_log_without_usage_is_zero() -> None:
    session = Session(SessionHeader("s", 0.0))
    assert session_usage(session) == NO_USAGE
    assert turn_usage(session, 1) == NO_USAGE
