"""dsh requests to chat-completions JSON: what goes over the wire, with which headers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

import dsh_llm as llm
from dsh_llm_openai import request_body
from dsh_system_prompt import ToolSchema

if TYPE_CHECKING:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

pytestmark = pytest.mark.anyio

READ_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}

HISTORY = (
    llm.Message.user("Read a and b."),
    llm.Message(
        "assistant",
        (
            llm.ReasoningBlock("The user wants two files."),
            llm.TextBlock("Reading."),
            llm.ToolCallBlock("call_a", "read", '{"path": "a"}'),
            llm.ToolCallBlock("call_b", "read", '{"path": "b"}'),
        ),
    ),
    llm.Message("tool", (llm.ToolResultBlock("call_a", "contents of a"),)),
    llm.Message("tool", (llm.ToolResultBlock("call_b", "no such file", is_error=True),)),
    llm.Message("assistant", (llm.ToolCallBlock("call_c", "read", "{}"),)),
    llm.Message("user", (llm.ToolResultBlock("call_c", "c"), llm.TextBlock("Now summarise."))),
    llm.Message("assistant", (llm.ReasoningBlock("interrupted before any answer"),)),
    llm.Message("user", (llm.ToolResultBlock("call_d", "d"),)),
    llm.Message("user", ()),
    llm.Message("assistant", (llm.TextBlock("Plain answer."),)),
)

EXPECTED_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Read a and b."},
    {
        "role": "assistant",
        "content": "Reading.",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "a"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "b"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "contents of a"},
    {"role": "tool", "tool_call_id": "call_b", "content": "no such file"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_c", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_c", "content": "c"},
    {"role": "user", "content": "Now summarise."},
    # the reasoning-only assistant message is left out
    {"role": "tool", "tool_call_id": "call_d", "content": "d"},
    {"role": "user", "content": ""},
    {"role": "assistant", "content": "Plain answer."},
]


def full_request() -> llm.LlmRequest:
    return llm.LlmRequest(
        model="test-model",
        messages=HISTORY,
        system="You are terse.",
        tools=(ToolSchema(name="read", description="Read a file.", parameters=READ_SCHEMA),),
        max_tokens=512,
    )


def test_request_body_maps_the_whole_history() -> None:
    assert request_body(full_request()) == {
        "model": "test-model",
        "messages": EXPECTED_MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read",
                    "description": "Read a file.",
                    "parameters": READ_SCHEMA,
                },
            }
        ],
        "max_tokens": 512,
    }


def test_send_reasoning_returns_reasoning_content_on_assistant_messages() -> None:
    messages = request_body(full_request(), send_reasoning=True)["messages"]
    assistants = [m for m in messages if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in assistants] == ["The user wants two files.", "", ""]


def test_a_minimal_request_has_no_system_tools_or_max_tokens() -> None:
    body = request_body(llm.LlmRequest(model="m", messages=(llm.Message.user("hi"),), system=""))
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_the_request_carries_key_flags_system_and_prompt(server: OpenAIServer) -> None:
    server.ok()
    request = llm.LlmRequest(
        model="test-model", messages=(llm.Message.user("What is 2+2?"),), system="Be brief."
    )
    assert (await server.run(request))[-1] == llm.Finish("stop")
    (seen,) = server.requests
    assert seen.method == "POST"
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test"
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["accept"] == "text/event-stream"
    assert seen.body["stream"] is True
    assert seen.body["stream_options"] == {"include_usage": True}
    assert seen.body["model"] == "test-model"
    assert seen.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
    ]


async def test_the_wire_body_is_request_body(server: OpenAIServer) -> None:
    server.ok()
    await server.run(full_request(), send_reasoning=True)
    assert server.requests[0].body == request_body(full_request(), send_reasoning=True)


async def test_unicode_goes_out_as_utf8(server: OpenAIServer) -> None:
    server.ok()
    await server.run("héllo → 世界")
    assert server.requests[0].body["messages"] == [{"role": "user", "content": "héllo → 世界"}]


async def test_no_api_key_sends_no_authorization(server: OpenAIServer) -> None:
    server.ok()
    await server.run(api_key=None)
    assert "authorization" not in server.requests[0].headers


async def test_extra_headers_are_sent_and_override_defaults(server: OpenAIServer) -> None:
    server.ok()
    await server.run(headers={"X-Title": "dsh", "Authorization": "Token other"})
    headers = server.requests[0].headers
    assert headers["x-title"] == "dsh"
    assert headers["authorization"] == "Token other"


async def test_a_trailing_slash_on_base_url_is_tolerated(server: OpenAIServer) -> None:
    server.ok()
    await server.run(base_url=server.url + "/")
    assert server.requests[0].path == "/v1/chat/completions"


async def test_a_base_url_without_v1_is_used_as_given(server: OpenAIServer) -> None:
    server.ok()
    await server.run(base_url=server.root)
    assert server.requests[0].path == "/chat/completions"
