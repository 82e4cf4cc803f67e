"""dsh requests to Messages API JSON: the body, the history's shape, the knobs, and the
headers that go over the wire."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

import dsh_llm as llm
from dsh_llm_anthropic import REDACTED, AnthropicConfig, request_body
from dsh_system_prompt import ToolSchema

if TYPE_CHECKING:
    from tests.plugins.llm_anthropic.anthropic_support import AnthropicServer

pytestmark = pytest.mark.anyio

READ_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}

HISTORY = (
    llm.Message.user("Read a and b."),
    llm.Message(
        "assistant",
        (
            llm.ReasoningBlock("Two files.", signature="c2lnLWE="),
            llm.TextBlock("Reading."),
            llm.ToolCallBlock("toolu_a", "read", '{"path": "a"}'),
            llm.ToolCallBlock("toolu_b", "read", '{"path": "b"}'),
        ),
    ),
    llm.Message("tool", (llm.ToolResultBlock("toolu_a", "contents of a"),)),
    llm.Message("tool", (llm.ToolResultBlock("toolu_b", "no such file", is_error=True),)),
    llm.Message.user("Now list them."),
    llm.Message(
        "assistant",
        (
            llm.ReasoningBlock("unsigned: from another model"),
            llm.ToolCallBlock("toolu_c", "ls", ""),
        ),
    ),
    llm.Message("user", (llm.TextBlock("Also this."), llm.ToolResultBlock("toolu_c", "a b"))),
    llm.Message("assistant", (llm.ReasoningBlock("interrupted before any answer"),)),
    llm.Message.user("Continue."),
    llm.Message(
        "assistant",
        (
            llm.ReasoningBlock("", signature=REDACTED + "ZW5jcnlwdGVk"),
            llm.TextBlock("Plain answer."),
        ),
    ),
    llm.Message.user("   "),
    llm.Message(
        "assistant",
        (llm.ToolCallBlock("toolu_d", "ls", "{oops"), llm.ToolCallBlock("toolu_e", "ls", "[1]")),
    ),
    llm.Message("tool", (llm.ToolResultBlock("toolu_d", ""), llm.ToolResultBlock("toolu_e", "x"))),
    llm.Message("user", ()),
)

EXPECTED_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "text", "text": "Read a and b."}]},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Two files.", "signature": "c2lnLWE="},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_b", "name": "read", "input": {"path": "b"}},
        ],
    },
    # Both results and the next user text: one user message, the results first.
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "contents of a"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_b",
                "content": "no such file",
                "is_error": True,
            },
            {"type": "text", "text": "Now list them."},
        ],
    },
    # Unsigned reasoning is not sent; empty arguments are the empty object.
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_c", "name": "ls", "input": {}}],
    },
    # The reasoning-only message is left out, so "Continue." joins this user message.
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_c", "content": "a b"},
            {"type": "text", "text": "Also this."},
            {"type": "text", "text": "Continue."},
        ],
    },
    # The blank user message is left out, so the two assistant messages around it are
    # one; arguments that are not a JSON object go back as {}.
    {
        "role": "assistant",
        "content": [
            {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
            {"type": "text", "text": "Plain answer."},
            {"type": "tool_use", "id": "toolu_d", "name": "ls", "input": {}},
            {"type": "tool_use", "id": "toolu_e", "name": "ls", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_d", "content": ""},
            {"type": "tool_result", "tool_use_id": "toolu_e", "content": "x"},
        ],
    },
]


def full_request(model: str = "claude-sonnet-4-5", **fields: Any) -> llm.LlmRequest:
    return llm.LlmRequest(
        model=model,
        messages=HISTORY,
        system="You are terse.",
        tools=(ToolSchema(name="read", description="Read a file.", parameters=READ_SCHEMA),),
        **fields,
    )


def test_request_body_maps_the_whole_history() -> None:
    assert request_body(full_request(max_tokens=512)) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "messages": EXPECTED_MESSAGES,
        "stream": True,
        "system": "You are terse.",
        "tools": [{"name": "read", "description": "Read a file.", "input_schema": READ_SCHEMA}],
    }


def test_a_minimal_request_gets_the_default_max_tokens_and_no_system_or_tools() -> None:
    body = request_body(llm.LlmRequest(model="m", messages=(llm.Message.user("hi"),), system=""))
    assert body == {
        "model": "m",
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": True,
    }


def test_thinking_is_on_when_the_token_limit_leaves_room_for_it() -> None:
    request = llm.LlmRequest(model="m", messages=(llm.Message.user("hi"),))
    body = request_body(request, max_tokens=16000, thinking_budget=4096)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert body["max_tokens"] == 16000
    # A request whose own limit is within the budget (a short summary) goes without.
    short = llm.LlmRequest(model="m", messages=(llm.Message.user("hi"),), max_tokens=4096)
    assert "thinking" not in request_body(short, max_tokens=16000, thinking_budget=4096)


def knobs(with_tools: bool = True, **values: Any) -> dict[str, Any]:
    config = AnthropicConfig(models=["m"], **values)
    tools = (ToolSchema(name="t", description="", parameters={"type": "object"}),)
    request = llm.LlmRequest(
        model="m", messages=(llm.Message.user("x"),), tools=tools if with_tools else ()
    )
    body = request_body(
        request, options=config.request_options(with_tools), extra=config.extra_body
    )
    keys = ("temperature", "top_p", "tool_choice", "top_k")
    return {k: body[k] for k in keys if k in body}


@pytest.mark.parametrize(
    ("values", "sent"),
    [
        ({}, {}),
        ({"temperature": 0.2, "top_p": 0.9}, {"temperature": 0.2, "top_p": 0.9}),
        ({"tool_choice": "auto"}, {"tool_choice": {"type": "auto"}}),
        ({"tool_choice": "required"}, {"tool_choice": {"type": "any"}}),
        ({"tool_choice": "none", "parallel_tool_calls": False}, {"tool_choice": {"type": "none"}}),
        (
            {"parallel_tool_calls": False},
            {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
        ),
        (
            {"tool_choice": "required", "parallel_tool_calls": True},
            {"tool_choice": {"type": "any", "disable_parallel_tool_use": False}},
        ),
        (
            {"tool_choice": {"type": "tool", "name": "t"}, "parallel_tool_calls": False},
            {"tool_choice": {"type": "tool", "name": "t"}},
        ),
        # extra_body is merged last and wins
        (
            {"temperature": 0.2, "extra_body": {"top_k": 20, "temperature": 0.5}},
            {"temperature": 0.5, "top_k": 20},
        ),
    ],
)
def test_knobs_are_sent_only_when_set(values: dict[str, Any], sent: dict[str, Any]) -> None:
    assert knobs(**values) == sent


def test_tool_settings_go_only_with_tools() -> None:
    assert knobs(False, tool_choice="required", parallel_tool_calls=False, top_p=0.5) == {
        "top_p": 0.5
    }


async def test_the_request_carries_the_key_the_version_and_no_authorization(
    server: AnthropicServer,
) -> None:
    server.ok()
    request = llm.LlmRequest(
        model="test-model", messages=(llm.Message.user("What is 2+2?"),), system="Be brief."
    )
    assert (await server.run(request, api_key="sk-ant-test-key"))[-1] == llm.Finish("stop")
    (seen,) = server.requests
    assert seen.method == "POST"
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == "sk-ant-test-key"
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen.headers
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["accept"] == "text/event-stream"
    assert seen.headers["user-agent"] == "dsh-harness llm-anthropic"
    assert seen.body == {
        "model": "test-model",
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]}],
        "stream": True,
        "system": "Be brief.",
    }


async def test_the_wire_body_follows_the_config(server: AnthropicServer) -> None:
    server.ok()
    config = {"max_tokens": 20000, "thinking": {"budget_tokens": 10000}, "top_p": 0.95}
    await server.run(full_request("test-model"), **config)
    assert server.requests[0].body == request_body(
        full_request("test-model"),
        max_tokens=20000,
        thinking_budget=10000,
        options={"top_p": 0.95},
    )


async def test_no_api_key_sends_no_key(server: AnthropicServer) -> None:
    server.ok()
    await server.run(api_key=None)
    assert "x-api-key" not in server.requests[0].headers


async def test_the_version_and_extra_headers_are_configurable(server: AnthropicServer) -> None:
    server.ok()
    headers = {"anthropic-beta": "interleaved-thinking-2025-05-14"}
    await server.run(anthropic_version="2024-01-01", headers=headers)
    seen = server.requests[0].headers
    assert seen["anthropic-version"] == "2024-01-01"
    assert seen["anthropic-beta"] == "interleaved-thinking-2025-05-14"


async def test_a_trailing_slash_on_base_url_is_tolerated(server: AnthropicServer) -> None:
    server.ok()
    await server.run(base_url=server.url + "/")
    assert server.requests[0].path == "/v1/messages"


async def test_unicode_goes_out_as_utf8(server: AnthropicServer) -> None:
    server.ok()
    await server.run("héllo → 世界")
    content = server.requests[0].body["messages"][0]["content"]
    assert content == [{"type": "text", "text": "héllo → 世界"}]
