"""``tool_choice`` by step: ``{first_step, then}`` (a tool forced on a turn's first model
request only), the plain form on every step, and what a strict server refuses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from dsh_llm import Finish, LlmRequest, Message, ToolCallBlock, ToolResultBlock
from dsh_llm_openai import (
    FunctionChoice,
    OpenAICompatible,
    OpenAICompatibleConfig,
    StepToolChoice,
)
from dsh_system_prompt import ToolSchema
from tests.plugins.llm_http_support import assert_refused
from tests.plugins.llm_openai.openai_support import final_failure

if TYPE_CHECKING:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

pytestmark = pytest.mark.anyio

BASH = ToolSchema("bash", "Run a command.", {"type": "object", "properties": {}})
READ = ToolSchema("read", "Read a file.", {"type": "object", "properties": {}})
FORCE_BASH = {"type": "function", "function": {"name": "bash"}}


def step_request(step: int | None, tools: tuple[ToolSchema, ...] = (BASH,)) -> LlmRequest:
    """A request of step ``step``: the prompt, then (from step 2) a call and its result."""
    messages: tuple[Message, ...] = (Message.user("list the files"),)
    if step is not None and step > 1:
        messages += (
            Message("assistant", (ToolCallBlock("c1", "bash", '{"command": "ls"}'),)),
            Message("tool", (ToolResultBlock("c1", "a.txt"),)),
        )
    return LlmRequest("test-model", messages, tools=tools, turn=1, step=step)


def choices(config: OpenAICompatibleConfig, *steps: int | None) -> list[Any]:
    """The ``tool_choice`` sent on each of ``steps`` (``"-"``: none sent)."""
    return [
        config.request_options(True, step, {"bash", "read"}).get("tool_choice", "-")
        for step in steps
    ]


@pytest.mark.parametrize(
    ("given", "first", "later"),
    [
        ({"first_step": "required", "then": "auto"}, "required", "auto"),
        ({"first_step": FORCE_BASH, "then": "none"}, FORCE_BASH, "none"),
        ({"first_step": "bash"}, FORCE_BASH, "-"),  # a tool's name; then: not sent
        ({"then": "none"}, "-", "none"),
        ({"first_step": "", "then": "read"}, "-", {**FORCE_BASH, "function": {"name": "read"}}),
    ],
)
def test_a_choice_per_step_applies_to_the_first_step_and_then_the_others(
    given: dict[str, Any], first: Any, later: Any
) -> None:
    config = OpenAICompatibleConfig.model_validate({"models": ["m"], "tool_choice": given})
    assert isinstance(config.tool_choice, StepToolChoice)
    # A request outside a turn (no step) counts as a first step.
    assert choices(config, 1, None, 2, 3, 50) == [first, first, later, later, later]


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (FORCE_BASH, FORCE_BASH),
        ("bash", FORCE_BASH),
        ("", "-"),  # an unset !env [NAME, ""]
        (None, "-"),
    ],
)
def test_the_plain_form_applies_to_every_step(given: Any, sent: Any) -> None:
    config = OpenAICompatibleConfig.model_validate({"models": ["m"], "tool_choice": given})
    assert choices(config, 1, 2, 7) == [sent, sent, sent]


def test_the_named_form_is_typed() -> None:
    config = OpenAICompatibleConfig.model_validate({"models": ["m"], "tool_choice": "bash"})
    assert config.tool_choice == FunctionChoice.model_validate(FORCE_BASH)
    assert config.step_tool_choice(4) == config.tool_choice


def test_a_choice_that_forces_a_tool_the_request_does_not_offer_is_left_out() -> None:
    # A subagent with fewer tools: forcing a tool it lacks would fail the request.
    config = OpenAICompatibleConfig.model_validate(
        {"models": ["m"], "tool_choice": {"first_step": "bash"}}
    )
    assert "tool_choice" not in config.request_options(True, 1, {"read"})
    assert config.request_options(True, 1)["tool_choice"] == FORCE_BASH  # names unknown
    assert "tool_choice" not in config.request_options(False, 1)  # no tools: never


@pytest.mark.parametrize(
    ("choice", "problem"),
    [
        ({}, r"tool_choice\.one"),
        ({"type": "function"}, r"tool_choice\.one\.FunctionChoice\.function"),
        ({"type": "function", "function": {"name": ""}}, r"at least 1 character"),
        ({"type": "allowed_tools", "function": {"name": "x"}}, r"Input should be 'function'"),
        ({"first_step": "auto", "thn": "none"}, r"tool_choice\.steps\.thn"),
        ({"first_step": {"type": "fn"}}, r"tool_choice\.steps\.first_step"),
        ({"first_step": "auto", "then": 3}, r"tool_choice\.steps\.then"),
        (3, r"tool_choice\.one"),
    ],
)
async def test_bad_choices_fail_the_plugin_naming_the_key(choice: Any, problem: str) -> None:
    await assert_refused(OpenAICompatible, {"models": ["m"], "tool_choice": choice}, problem)


async def test_the_adapter_sends_each_step_its_choice(server: OpenAIServer) -> None:
    config = {"tool_choice": {"first_step": "bash", "then": "none"}}
    async with server.llm(**config) as llm:
        for step in (1, 2):
            server.ok()
            async for _ in llm.stream(step_request(step, (BASH, READ))):
                pass
    sent = [seen.body.get("tool_choice") for seen in server.requests]
    assert sent == [FORCE_BASH, "none"]


async def test_a_strict_server_takes_a_forced_first_step_then_an_answer(
    server: OpenAIServer,
) -> None:
    # The llama-cpp-python shape: only a named function makes it call a tool; "none"
    # makes it answer. Both pass its validation.
    server.strict = True
    server.stream(
        server.delta(tool_calls=[server.tool(0, id="c1", name="bash", arguments="{}")]),
        server.delta(finish="tool_calls"),
        "[DONE]",
    )
    server.ok("a.txt is there")
    config = {"tool_choice": {"first_step": "bash", "then": "none"}, "max_retries": 0}
    async with server.llm(**config) as llm:
        first = [chunk async for chunk in llm.stream(step_request(1))]
        second = [chunk async for chunk in llm.stream(step_request(2))]
    assert first[-1] == Finish("tool-calls")
    assert second[-1] == Finish("stop")
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("choice", "code", "text"),
    [
        # "required" fails inside llama-cpp-python after its 200: no event at all.
        ("required", "BAD_RESPONSE", "the server may have failed mid-request"),
        ({"first_step": "auto", "then": "x"}, None, None),  # step 1 sends auto: answered
    ],
)
async def test_a_strict_server_on_what_it_cannot_do(
    server: OpenAIServer, choice: Any, code: str | None, text: str | None
) -> None:
    server.strict = True
    server.ok()
    chunks = await server.run(step_request(1), tool_choice=choice, max_retries=0)
    if code is None:
        assert chunks[-1] == Finish("stop")
    else:
        got = final_failure(chunks)
        assert got.code == code
        assert str(text) in got.message


async def test_a_strict_server_refuses_a_tool_it_was_not_offered(server: OpenAIServer) -> None:
    # Through request_body directly: the adapter itself never sends such a choice.
    server.strict = True
    server.ok()
    request = step_request(1)
    chunks = await server.run(
        request,
        extra_body={"tool_choice": {"type": "function", "function": {"name": "nope"}}},
        max_retries=0,
    )
    got = final_failure(chunks)
    assert got.code == "SERVER_ERROR"
    assert "Tool with name 'nope' not found" in got.message
