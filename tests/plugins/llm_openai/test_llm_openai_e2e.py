"""End to end: through ``Llm.stream`` and ``BlockAssembler``, and from a YAML deployment
whose agent completes a turn with a tool call against the loopback server."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dsh import Context, load_deployment
from dsh.testing import write_deployment
from dsh_llm import (
    BlockAssembler,
    Finish,
    LlmRequest,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    Usage,
)
from tests.support import event_data

if TYPE_CHECKING:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

pytestmark = pytest.mark.anyio


async def test_llm_stream_and_the_assembler_build_the_message(server: OpenAIServer) -> None:
    d, t = server.delta, server.tool
    server.stream(
        d(None, reasoning="Two files.", role="assistant"),
        d("Reading them."),
        d(tool_calls=[t(0, id="call_1", name="read", arguments='{"path":')]),
        d(tool_calls=[t(0, arguments=' "a.txt"}')]),
        d(tool_calls=[t(1, id="call_2", name="read", arguments='{"path": "b.txt"}')]),
        d(finish="tool_calls"),
        server.usage(120, 30, cached=100, reasoning=4),
        "[DONE]",
    )
    request = LlmRequest(model="test-model", messages=(Message.user("read a and b"),))
    assembler = BlockAssembler()
    async with server.llm() as llm, aclosing(llm.stream(request)) as stream:
        async for chunk in stream:
            assembler.push(chunk)
    result = assembler.result()
    assert result.message == Message(
        "assistant",
        (
            ReasoningBlock("Two files."),
            TextBlock("Reading them."),
            ToolCallBlock("call_1", "read", '{"path": "a.txt"}'),
            ToolCallBlock("call_2", "read", '{"path": "b.txt"}'),
        ),
    )
    assert result.usage == Usage(20, 30, cache_read_tokens=100, reasoning_tokens=4)
    assert result.finish == Finish("tool-calls")


async def test_an_http_error_reaches_the_assembler_as_the_finish(server: OpenAIServer) -> None:
    server.reply(400, {"error": {"message": "context too long"}})
    request = LlmRequest(model="test-model", messages=(Message.user("hi"),))
    assembler = BlockAssembler()
    async with server.llm() as llm, aclosing(llm.stream(request)) as stream:
        async for chunk in stream:
            assembler.push(chunk)
    finish = assembler.result().finish
    assert finish.reason == "error"
    assert finish.failure is not None
    assert finish.failure.code == "BAD_REQUEST"
    assert finish.failure.message.endswith("context too long")


TOOL_PLUGIN = """
from pydantic import BaseModel

from dsh_tools import Tool, ToolCall

name = "shout-tool"
inject = ["tools"]


class ShoutArgs(BaseModel):
    text: str


async def shout(args: ShoutArgs, call: ToolCall) -> str:
    return args.text.upper()


def apply(ctx, config):
    yield ctx.tools.register(
        Tool(name="shout", description="Upper-case the text.", parameters=ShoutArgs,
             execute=shout)
    )
"""

DEPLOYMENT = """
- id: model
  name: llm-openai
  config:
    api_key: !env TEST_KEY
    base_url: !env TEST_BASE_URL
    models: [loopback-model]
    retry_backoff: 0
    send_reasoning: true
- id: agent-core
  name: agent-core
  config:
    model: loopback-model
    persona: "You are a loopback agent."
- id: shout
  name: ./shout_tool.py
"""


async def test_a_yaml_deployment_completes_a_turn_with_a_tool_call(
    server: OpenAIServer, tmp_path: Path
) -> None:
    d, t = server.delta, server.tool
    server.stream(
        d(None, reasoning="Use the tool.", role="assistant"),
        d(tool_calls=[t(0, id="call_shout", name="shout", arguments='{"te')]),
        d(tool_calls=[t(0, arguments='xt": "hello"}')]),
        d(finish="tool_calls"),
        server.usage(200, 12),
        "[DONE]",
    )
    server.stream(
        d("The tool said "),
        d("HELLO."),
        d(finish="stop"),
        server.usage(230, 5, cached=200),
        "[DONE]",
    )
    (tmp_path / "shout_tool.py").write_text(TOOL_PLUGIN)
    path = write_deployment(tmp_path, DEPLOYMENT)
    environ = {"TEST_KEY": "sk-from-env", "TEST_BASE_URL": server.url}
    async with Context() as root:
        deployment = await load_deployment(path, root, environ=environ)
        agent = root.agents.get("main")
        assert agent is not None
        agent.send("shout hello")
        await agent.when_idle()
        session = agent.session
        assert session.turn_end(1) == {"kind": "completed"}
        messages = [
            Message.from_json(m["message"]) for m in event_data(session, "assistant/message")
        ]
        assert messages[0].tool_calls == [ToolCallBlock("call_shout", "shout", '{"text": "hello"}')]
        assert messages[1].text == "The tool said HELLO."
        (result,) = event_data(session, "tool/result")
        assert result["content"] == "HELLO"
        assert event_data(session, "assistant/message")[1]["usage"] == {
            "input_tokens": 30,
            "output_tokens": 5,
            "cache_read_tokens": 200,
        }
        await deployment.dispose()
        assert root.get("llm") is None

    first, second = server.requests
    for seen in (first, second):
        assert seen.path == "/v1/chat/completions"
        assert seen.headers["authorization"] == "Bearer sk-from-env"
        assert seen.body["model"] == "loopback-model"
        assert seen.body["stream"] is True
        assert [tool["function"]["name"] for tool in seen.body["tools"]] == ["shout"]
    system, user = first.body["messages"]
    assert system["role"] == "system"
    assert "You are a loopback agent." in system["content"]
    assert user == {"role": "user", "content": "shout hello"}
    assert second.body["messages"][1:] == [
        {"role": "user", "content": "shout hello"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_shout",
                    "type": "function",
                    "function": {"name": "shout", "arguments": '{"text": "hello"}'},
                }
            ],
            "reasoning_content": "Use the tool.",
        },
        {"role": "tool", "tool_call_id": "call_shout", "content": "HELLO"},
    ]
