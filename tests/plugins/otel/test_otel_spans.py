"""``otel`` (ARCHITECTURE §6.18, RFC 0042): the spans of turns, model requests and
tool calls, by the GenAI semantic conventions, recorded with the SDK's in-memory
exporter."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from dsh import Context
from dsh.testing import ScriptedModel, failure, run_turn, text, tool_call, tool_calls
from dsh_agent import HookDecision
from dsh_agent_core import AgentCore
from dsh_otel import Otel
from dsh_tools import Tool, ToolCall, ToolResult
from tests.plugins.otel.otel_support import Spans, parent_of, span_id, trace_id
from tests.plugins.tool_subagent.tool_subagent_support import subagent_rig
from tests.support import MainRig, cancelled_while_streaming

pytestmark = pytest.mark.anyio


class Args(BaseModel):
    text: str = ""


async def echo(args: Args, call: ToolCall) -> str | ToolResult:
    if args.text == "fail":
        return ToolResult("Error: it broke", is_error=True, code="BROKE")
    return f"echo: {args.text}"


@dataclass
class Rig(MainRig):
    fiber: Any


@asynccontextmanager
async def rig(**config: Any) -> AsyncIterator[Rig]:
    """agent-core (agent ``main`` on model ``m``), an ``echo`` tool, and ``otel``."""
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        model = ScriptedModel(models=["m"])
        model.provider = "llm-openai"  # type: ignore[attr-defined]  # what an adapter may name
        model.install(root)
        root.tools.register(Tool(name="echo", description="echo", parameters=Args, execute=echo))
        fiber = await root.plugin(Otel, config)
        yield Rig(root, model, fiber)


def echo_call(text_: str = "hi") -> Any:
    return tool_calls(tool_call("echo", {"text": text_}, id="c1"), usage=(12, 3))


async def test_a_turn_has_an_agent_span_over_its_chat_and_tool_spans(host_spans: Spans) -> None:
    async with rig() as r:
        r.model.reply(echo_call(), text("done", usage=(20, 5)))
        assert await run_turn(r.agent, "go") == {"kind": "completed"}
        session = r.agent.session.id
    assert host_spans.names() == ["chat m", "execute_tool echo", "chat m", "invoke_agent main"]
    turn = host_spans.one("invoke_agent main")
    first, second = host_spans.named("chat m")
    tool = host_spans.one("execute_tool echo")
    assert turn.parent is None
    for child in (first, second, tool):
        assert parent_of(child) == span_id(turn)
        assert trace_id(child) == trace_id(turn)
    assert dict(turn.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "main",
        "gen_ai.conversation.id": session,
        "gen_ai.request.model": "m",
        "dsh.turn": 1,
        "dsh.turn.end": "completed",
    }
    assert dict(first.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
        "gen_ai.conversation.id": session,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 3,
    }
    assert second.attributes is not None
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert second.attributes["gen_ai.usage.input_tokens"] == 20
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
    }
    assert first.kind.name == "CLIENT"
    assert tool.kind.name == "INTERNAL"
    assert all(span.status.status_code is StatusCode.UNSET for span in host_spans.all())


async def test_no_content_is_recorded_by_default(host_spans: Spans) -> None:
    async with rig() as r:
        r.model.reply(echo_call("secret"), "the secret answer")
        await run_turn(r.agent, "my secret prompt")
    for span in host_spans.all():
        recorded = json.dumps(dict(span.attributes or {}), default=str)
        assert "secret" not in recorded


async def test_capture_content_records_messages_arguments_and_results(host_spans: Spans) -> None:
    async with rig(capture_content=True) as r:
        r.model.reply(echo_call("x"), "bye")
        await run_turn(r.agent, "hello")
    first, second = host_spans.named("chat m")
    tool = host_spans.one("execute_tool echo")
    assert first.attributes is not None
    assert second.attributes is not None
    assert json.loads(str(first.attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "hello"}]}
    ]
    assert json.loads(str(first.attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "echo", "arguments": '{"text": "x"}'}
            ],
        }
    ]
    history = json.loads(str(second.attributes["gen_ai.input.messages"]))
    assert history[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": "echo: x"}],
    }
    assert json.loads(str(second.attributes["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "bye"}]}
    ]
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"text": "x"}'
    assert tool.attributes["gen_ai.tool.call.result"] == "echo: x"


async def test_a_failed_model_request_is_the_status_of_its_chat_and_turn_spans(
    host_spans: Spans,
) -> None:
    async with rig() as r:
        r.model.reply(failure("the server is down", "SERVER_ERROR"))
        reason = await run_turn(r.agent, "go")
    assert reason is not None
    assert reason["kind"] == "error"
    chat = host_spans.one("chat m")
    turn = host_spans.one("invoke_agent main")
    for span in (chat, turn):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "the server is down"
        assert span.attributes is not None
        assert span.attributes["error.type"] == "SERVER_ERROR"
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("error",)


async def test_a_failed_tool_call_is_the_status_of_its_span(host_spans: Spans) -> None:
    async with rig() as r:
        r.model.reply(echo_call("fail"), "ok")
        await run_turn(r.agent, "go")
    tool = host_spans.one("execute_tool echo")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description == "Error: it broke"
    assert tool.attributes is not None
    assert tool.attributes["error.type"] == "BROKE"
    assert host_spans.one("invoke_agent main").status.status_code is StatusCode.UNSET


async def test_an_aborted_turn_ends_its_spans_and_the_stream_reads_cancelled(
    host_spans: Spans,
) -> None:
    async with rig() as r:
        await cancelled_while_streaming(r.model, r.agent, "go")
    chat = host_spans.one("chat m")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes is not None
    assert chat.attributes["error.type"] == "cancelled"
    turn = host_spans.one("invoke_agent main")
    assert turn.status.status_code is StatusCode.UNSET
    assert turn.attributes is not None
    assert turn.attributes["dsh.turn.end"] == "aborted"


def delegate(call_id: str, prompt: str) -> Any:
    return tool_call("subagent", {"description": "d", "prompt": prompt}, id=call_id)


async def test_a_subagents_turn_is_under_its_parents_tool_span(host_spans: Spans) -> None:
    async with subagent_rig() as r:
        await r.root.plugin(Otel)
        r.route([tool_calls(delegate("d1", "look")), "parent done", "again"], ["child done"])
        assert await run_turn(r.main, "delegate") == {"kind": "completed"}
        # The parent's next turn is a root again: the tool span it ran under ended.
        assert await run_turn(r.main, "more") == {"kind": "completed"}
    first, second = host_spans.named("invoke_agent main")
    (call,) = host_spans.named("execute_tool subagent")
    (child,) = [s for s in host_spans.all() if s.name.startswith("invoke_agent spawn-")]
    assert parent_of(call) == span_id(first)
    assert parent_of(child) == span_id(call)
    assert trace_id(child) == trace_id(first)
    child_chats = [s for s in host_spans.named("chat scripted") if parent_of(s) == span_id(child)]
    assert len(child_chats) == 1
    assert second.parent is None
    assert trace_id(second) != trace_id(first)


async def test_concurrent_subagents_each_go_under_their_own_call(host_spans: Spans) -> None:
    async with subagent_rig() as r:
        await r.root.plugin(Otel)
        r.route(
            [tool_calls(delegate("d1", "one"), delegate("d2", "two")), "parent done"],
            ["child done", "child done"],
        )
        assert await run_turn(r.main, "delegate") == {"kind": "completed"}
    calls = {
        s.attributes["gen_ai.tool.call.id"]: s
        for s in host_spans.named("execute_tool subagent")
        if s.attributes is not None
    }
    children = [s for s in host_spans.all() if s.name.startswith("invoke_agent spawn-")]
    assert sorted(parent_of(s) for s in children) == sorted(span_id(s) for s in calls.values())


async def test_a_fleet_tasks_turn_is_the_root_of_its_trace_with_the_task_id(
    host_spans: Spans,
) -> None:
    async with rig() as r:
        session = r.root.sessions.prepare(cwd=".", meta={"agent": "fleet:t7", "task": "t7"})
        agent = r.root.agents.create("fleet:t7", model="m", session=session)
        r.model.reply("done")
        await run_turn(agent, "go")
    turn = host_spans.one("invoke_agent fleet:t7")
    assert turn.parent is None
    assert turn.attributes is not None
    assert turn.attributes["dsh.fleet.task.id"] == "t7"


async def test_a_call_refused_after_its_span_opened_ends_with_the_turn(host_spans: Spans) -> None:
    async with rig() as r:
        r.root.on("tool/before", lambda call: HookDecision("deny", "not now"))
        r.model.reply(echo_call(), "ok")
        await run_turn(r.agent, "go")
    tool = host_spans.one("execute_tool echo")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes is not None
    assert tool.attributes["error.type"] == "NOT_FINISHED"
    assert parent_of(tool) == span_id(host_spans.one("invoke_agent main"))


async def test_a_call_refused_before_the_plugin_hears_it_has_no_span(host_spans: Spans) -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        model = ScriptedModel(echo_call(), "ok", models=["m"])
        model.install(root)
        root.on("tool/before", lambda call: HookDecision("deny", "no"))
        await root.plugin(Otel)
        await run_turn(root.agents.get("main"), "go")
    assert host_spans.named("execute_tool echo") == []
