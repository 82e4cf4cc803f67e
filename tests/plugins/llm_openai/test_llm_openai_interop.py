"""Real servers' demands: message shapes a strict server (llama-cpp-python's) accepts,
the knobs servers need, and a session that survives a context-length refusal."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dsh import Context, load_deployment
from dsh.testing import run_turn, write_deployment
from dsh_llm import LlmRequest, Message, ToolCallBlock, ToolResultBlock
from dsh_llm_openai import OpenAICompatibleConfig, request_body
from dsh_system_prompt import ToolSchema
from tests.plugins.llm_openai.openai_support import final_failure, llama_cpp_problems

if TYPE_CHECKING:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

pytestmark = pytest.mark.anyio

SHOUT_TOOL = """\
from pydantic import BaseModel

from dsh_tools import Tool


class ShoutArgs(BaseModel):
    text: str


async def shout(args, call):
    return args.text.upper()


inject = ["tools"]


def apply(ctx, config):
    return ctx.tools.register(
        Tool(name="shout", description="Shout.", parameters=ShoutArgs, execute=shout)
    )
"""

STRICT_DEPLOYMENT = """\
- id: model
  name: llm-openai
  config:
    base_url: "%s"
    models: [local]
    retry_backoff: 0
    max_retries: 0
    context_windows: {local: 1000}
- id: core
  name: agent-core
  config: {model: local, persona: "Use tools."}
- id: shout
  name: ./shout_tool.py
"""


def test_the_strict_server_refuses_null_and_missing_content() -> None:
    # The loopback server's validation is the one the real server applies.
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert llama_cpp_problems([{"role": "assistant", "content": None, "tool_calls": [call]}])
    assert llama_cpp_problems([{"role": "assistant", "tool_calls": [call]}])
    assert llama_cpp_problems([{"role": "tool", "tool_call_id": "c9", "content": "x"}])
    assert llama_cpp_problems([{"role": "robot", "content": "x"}])
    assert not llama_cpp_problems(
        [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
        ]
    )


def test_a_message_that_only_calls_tools_is_sent_with_empty_content() -> None:
    request = LlmRequest(
        model="m",
        messages=(
            Message.user("go"),
            Message("assistant", (ToolCallBlock("c1", "shout", "{}"),)),
            Message("tool", (ToolResultBlock("c1", "DONE"),)),
        ),
    )
    assistant = request_body(request)["messages"][1]
    assert assistant["content"] == ""
    assert llama_cpp_problems(request_body(request)["messages"]) == []


async def test_a_tool_round_trip_against_a_strict_server(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.strict = True
    d, t = server.delta, server.tool
    server.stream(
        d(tool_calls=[t(0, id="call_1", name="shout", arguments='{"text": "hi"}')]),
        d(finish="tool_calls"),
        "[DONE]",
    )
    server.ok("It said HI.")
    (tmp_path / "shout_tool.py").write_text(SHOUT_TOOL)
    path = write_deployment(tmp_path, STRICT_DEPLOYMENT % server.url)
    async with Context() as root:
        await load_deployment(path, root)
        agent = root.agents.get("main")
        assert await run_turn(agent, "shout hi") == {"kind": "completed"}
        assert agent.session.derive_messages()[-1].text == "It said HI."
    assert len(server.requests) == 2
    assert all(not llama_cpp_problems(r.body["messages"]) for r in server.requests)


def knobs(**values: Any) -> dict[str, Any]:
    config = OpenAICompatibleConfig(models=["m"], **values)
    tool = ToolSchema(name="t", description="", parameters={"type": "object"})
    request = LlmRequest(model="m", messages=(Message.user("x"),), tools=(tool,))
    bare = LlmRequest(model="m", messages=(Message.user("x"),))
    with_tools = request_body(
        request, options=config.request_options(True), extra=config.extra_body
    )
    without = request_body(bare, options=config.request_options(False), extra=config.extra_body)
    keys = ("temperature", "top_p", "seed", "tool_choice", "parallel_tool_calls", "top_k")
    return {
        "with_tools": {k: with_tools[k] for k in keys if k in with_tools},
        "without_tools": {k: without[k] for k in keys if k in without},
    }


def test_knobs_are_sent_only_when_set() -> None:
    assert knobs() == {"with_tools": {}, "without_tools": {}}
    assert knobs(
        temperature=0.2,
        top_p=0.9,
        seed=7,
        tool_choice="required",
        parallel_tool_calls=False,
        extra_body={"top_k": 20, "seed": 8},
    ) == {
        # extra_body is merged last and wins
        "with_tools": {
            "temperature": 0.2,
            "top_p": 0.9,
            "seed": 8,
            "tool_choice": "required",
            "parallel_tool_calls": False,
            "top_k": 20,
        },
        # tool settings go only with tools (servers refuse them without)
        "without_tools": {"temperature": 0.2, "top_p": 0.9, "seed": 8, "top_k": 20},
    }


@pytest.mark.parametrize("empty", [False, True], ids=["400", "empty-200"])
async def test_a_context_length_refusal_does_not_poison_the_session(
    server: OpenAIServer, tmp_path: Path, empty: bool
) -> None:
    # The rule of RFC 0009 on the case that matters: a request refused for its length
    # is not sent again, so the next turn fits and works. llama-cpp-python refuses with
    # a 200 and an empty stream: the request's size against the window says why.
    server.context_chars = 1000
    server.empty_overflow = empty
    server.ok("short answer")
    (tmp_path / "shout_tool.py").write_text(SHOUT_TOOL)
    path = write_deployment(tmp_path, STRICT_DEPLOYMENT % server.url)
    async with Context() as root:
        await load_deployment(path, root)
        agent = root.agents.get("main")
        refused = await run_turn(agent, "x" * 5000)
        assert refused is not None
        assert refused["code"] == "CONTEXT_LENGTH"
        assert await run_turn(agent, "a short question") == {"kind": "completed"}
        sent = server.requests[-1].body["messages"]
        assert [m["content"] for m in sent[1:]] == ["a short question"]
        # The log keeps the refused message; the history does not.
        assert agent.session.unanswered(1) == [Message.user("x" * 5000)]
        assert [m.text for m in agent.session.derive_messages()] == [
            "a short question",
            "short answer",
        ]


async def test_context_length_is_its_own_code(server: OpenAIServer) -> None:
    server.reply(400, {"error": {"message": "the request exceeds the available context size"}})
    got = final_failure(await server.run())
    assert got.code == "CONTEXT_LENGTH"
    assert got.message.startswith("the request is too long for the context window of 'test-model'")


async def test_a_body_without_events_names_the_request_id(server: OpenAIServer) -> None:
    server.stream(b"", headers={"x-request-id": "req-empty"})
    got = final_failure(await server.run())
    assert got.code == "BAD_RESPONSE"
    assert got.request_id == "req-empty"
    assert "without a single server-sent event (an empty body); the server may have failed " in (
        got.message
    )
    assert got.message.endswith("(request id req-empty)")
