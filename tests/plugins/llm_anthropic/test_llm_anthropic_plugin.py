"""The plugin's config: defaults, and what it refuses (registration, disposal and the
entry point are tested for every HTTP adapter in ``tests/plugins/llm_http``)."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_llm_anthropic import (
    DEFAULT_BASE_URL,
    DEFAULT_VERSION,
    AnthropicConfig,
    AnthropicMessages,
)
from tests.plugins.llm_http_support import assert_refused

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
    await assert_refused(AnthropicMessages, config, problem)


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
