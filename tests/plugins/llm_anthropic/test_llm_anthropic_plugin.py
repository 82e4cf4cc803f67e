"""The plugin: config validation, registration, disposal (also mid-stream), the entry
point, and the adapter on its own."""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest

from dsh import ConfigError, Context, FiberState
from dsh_agent_core import AgentCore
from dsh_llm import Finish, Llm, LlmRequest, Message, TextDelta
from dsh_llm_anthropic import (
    DEFAULT_BASE_URL,
    DEFAULT_VERSION,
    AnthropicAdapter,
    AnthropicConfig,
    AnthropicMessages,
)
from dsh_session import Session, SessionEvent
from tests.plugins.llm_anthropic.anthropic_support import recording
from tests.plugins.llm_http_support import HTTPX_GC_WARNING

if TYPE_CHECKING:
    from tests.plugins.llm_anthropic.anthropic_support import AnthropicServer

pytestmark = pytest.mark.anyio


def test_defaults() -> None:
    config = AnthropicConfig(models=["claude-sonnet-4-5"])
    assert config.base_url == DEFAULT_BASE_URL == "https://api.anthropic.com"
    assert config.anthropic_version == DEFAULT_VERSION == "2023-06-01"
    assert config.max_tokens == 8192
    assert config.thinking is None
    assert (config.max_retries, config.retry_backoff, config.read_timeout) == (2, 0.5, 120)
    assert "sk-ant" not in repr(AnthropicConfig(api_key="sk-ant-hidden", models=["m"]))


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"api_key": "", "models": ["m"]}, r"api_key is empty .*\(at api_key\)"),
        ({}, r"Field required \(at models\)"),
        ({"models": ["m"], "base_url": "api.anthropic.com"}, r"must start with http"),
        ({"models": ["m"], "max_tokens": 0}, r"\(at max_tokens\)"),
        ({"models": ["m"], "temperature": 1.5}, r"less than or equal to 1 \(at temperature\)"),
        ({"models": ["m"], "anthropic_version": ""}, r"\(at anthropic_version\)"),
        ({"models": ["m"], "thinking": {"budget_tokens": 512}}, r"\(at thinking.budget_tokens\)"),
        ({"models": ["m"], "thinking": {"budget": 2048}}, r"Extra inputs .*\(at thinking.budget\)"),
        ({"models": ["m"], "send_reasoning": True}, r"Extra inputs .*\(at send_reasoning\)"),
        (
            {"models": ["m"], "thinking": {"budget_tokens": 8192}},
            r"thinking.budget_tokens \(8192\) must be less than max_tokens \(8192\)",
        ),
        (
            {"models": ["m"], "thinking": {"budget_tokens": 2048}, "temperature": 0.5},
            r"temperature cannot be set with thinking",
        ),
        (
            {"models": ["m"], "thinking": {"budget_tokens": 2048}, "top_p": 0.5},
            r"top_p must be at least 0.95 with thinking, got 0.5",
        ),
        (
            {"models": ["m"], "thinking": {"budget_tokens": 2048}, "tool_choice": "required"},
            r"tool_choice 'required' forces a tool call, which thinking does not allow",
        ),
        (
            {
                "models": ["m"],
                "thinking": {"budget_tokens": 2048},
                "tool_choice": {"type": "tool", "name": "t"},
            },
            r"forces a tool call",
        ),
    ],
)
async def test_bad_configs_fail_the_plugin_naming_the_key(
    config: dict[str, Any], problem: str
) -> None:
    async with Context() as root:
        await root.plugin(Llm)
        with pytest.raises(ConfigError, match=problem) as info:
            await root.plugin(AnthropicMessages, config)
        assert "llm-anthropic" in str(info.value)
        assert root.llm.models() == []


def test_thinking_that_fits_is_accepted() -> None:
    config = AnthropicConfig.model_validate(
        {
            "models": ["m"],
            "max_tokens": 16000,
            "thinking": {"budget_tokens": 10000},
            "tool_choice": "auto",
        }
    )
    assert config.thinking is not None
    assert config.thinking.budget_tokens == 10000


async def test_mounting_registers_the_models_and_disposing_removes_them(
    server: AnthropicServer,
) -> None:
    async with Context() as root:
        await root.plugin(Llm)
        before = root.llm.models()
        fiber = root.plugin(AnthropicMessages, server.config(models=["claude-a", "claude-b"]))
        await fiber
        assert fiber.state is FiberState.ACTIVE
        assert root.llm.models() == [*before, "claude-a", "claude-b"]
        plugin = fiber.instance
        assert isinstance(plugin, AnthropicMessages)
        adapter = plugin.adapter
        assert isinstance(adapter, AnthropicAdapter)
        assert repr(adapter) == (
            f"<AnthropicAdapter {server.url}/v1/messages models=['claude-a', 'claude-b']>"
        )
        client = adapter._client
        assert not client.is_closed
        await fiber.dispose()
        assert root.llm.models() == before
        assert client.is_closed


async def test_the_adapter_works_without_the_runtime(server: AnthropicServer) -> None:
    server.answer("standalone")
    config = AnthropicConfig.model_validate(server.config())
    async with httpx.AsyncClient() as client:
        adapter = AnthropicAdapter(config, client)
        request = LlmRequest(model="test-model", messages=(Message.user("hi"),))
        chunks = [chunk async for chunk in adapter.stream(request)]
    assert TextDelta(0, "standalone") in chunks
    assert chunks[-1] == Finish("stop")


@HTTPX_GC_WARNING
async def test_disposing_the_root_mid_stream_ends_the_turn_disposed(
    server: AnthropicServer,
) -> None:
    # The client closes only after the turn using it ended (the inflight drain).
    server.stream(*recording("text")[:4], server.HOLD)
    async with Context() as root:
        root.plugin(AnthropicMessages, server.config())
        root.plugin(AgentCore, {"model": "test-model"})
        await root.settle()
        agent = root.agents.get("main")
        session = agent.session
        streamed = anyio.Event()

        def watch(of: Session, event: SessionEvent) -> None:
            if event.type == "assistant/chunk" and event.data["chunk"].get("text") == "Hello":
                streamed.set()

        root.on("session/event", watch)
        agent.send("hi")
        await streamed.wait()
    assert session.turn_end(1) == {"kind": "aborted", "reason": "disposed"}
    await server.wait_disconnect()


def test_the_entry_point_names_the_plugin() -> None:
    (entry,) = [
        e for e in importlib.metadata.entry_points(group="dsh.plugins") if e.name == "llm-anthropic"
    ]
    assert entry.load() is AnthropicMessages
    assert AnthropicMessages.name == "llm-anthropic"
    assert tuple(AnthropicMessages.inject) == ("llm",)
