"""The plugin: config validation, registration, disposal, the entry point."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

import dsh
from dsh import Context, FiberState
from dsh.testing import state
from dsh_llm import Llm
from dsh_llm_openai import (
    DEFAULT_BASE_URL,
    OpenAICompatible,
    OpenAICompatibleConfig,
)
from tests.plugins.llm_http_support import assert_refused

if TYPE_CHECKING:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

pytestmark = pytest.mark.anyio


def test_defaults() -> None:
    config = OpenAICompatibleConfig(models=["gpt-4o-mini"])
    assert config.api_key is None
    assert config.base_url == DEFAULT_BASE_URL == "https://api.openai.com/v1"
    assert (config.connect_timeout, config.read_timeout) == (10, 120)
    assert (config.max_retries, config.retry_backoff, config.max_retry_after) == (2, 0.5, 60)
    assert config.headers == {}
    assert config.send_reasoning is False


def test_the_key_stays_out_of_the_config_repr() -> None:
    config = OpenAICompatibleConfig(api_key="sk-hidden", models=["m"])
    assert "sk-hidden" not in repr(config)


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"api_key": "", "models": ["m"]}, r"api_key is empty .*\(at api_key\)"),
        ({"api_key": "  ", "models": ["m"]}, r"api_key is empty"),
        ({"models": []}, r"at least 1 item .*\(at models\)"),
        ({}, r"Field required \(at models\)"),
        ({"models": [""]}, r"model names must be non-empty \(at models\)"),
        ({"models": ["a", "a"]}, r"model names repeat"),
        ({"models": ["m"], "base_url": "api.deepseek.com"}, r"must start with http"),
        ({"models": ["m"], "read_timeout": 0}, r"greater than 0 \(at read_timeout\)"),
        ({"models": ["m"], "connect_timeout": -1}, r"\(at connect_timeout\)"),
        ({"models": ["m"], "max_retries": -1}, r"\(at max_retries\)"),
        ({"models": ["m"], "retry_backoff": -0.1}, r"\(at retry_backoff\)"),
        ({"models": ["m"], "headers": {"X": 1}}, r"\(at headers.X\)"),
        ({"models": ["m"], "model": "m"}, r"Extra inputs are not permitted \(at model\)"),
    ],
)
async def test_bad_configs_fail_the_plugin_naming_the_key(
    config: dict[str, Any], problem: str
) -> None:
    await assert_refused(OpenAICompatible, config, problem)


async def test_two_instances_serve_different_models(server: OpenAIServer) -> None:
    async with Context() as root:
        await root.plugin(Llm)
        await root.plugin(OpenAICompatible, server.config(models=["deepseek-chat"]))
        await root.plugin(OpenAICompatible, server.config(models=["llama3.2"], api_key=None))
        assert root.llm.models() == ["deepseek-chat", "llama3.2"]


async def test_a_model_served_twice_fails_the_second_and_leaves_no_client(
    server: OpenAIServer,
) -> None:
    async with Context() as root:
        await root.plugin(Llm)
        await root.plugin(OpenAICompatible, server.config())
        second = root.plugin(OpenAICompatible, server.config())
        with pytest.raises(dsh.DshError, match='model "test-model" is already registered'):
            await second
        assert second.state is FiberState.FAILED
        assert root.llm.models() == ["test-model"]


async def test_it_waits_for_the_llm_service(server: OpenAIServer) -> None:
    async with Context() as root:
        fiber = root.plugin(OpenAICompatible, server.config())
        await fiber
        assert state(fiber) is FiberState.PENDING
        await root.plugin(Llm)
        await fiber
        assert state(fiber) is FiberState.ACTIVE
        assert root.llm.models() == ["test-model"]
