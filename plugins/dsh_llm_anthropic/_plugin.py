"""The ``llm-anthropic`` plugin: one adapter, one HTTP client, both undone on unload."""

from __future__ import annotations

from dsh_llm.http import HttpModelPlugin

from ._adapter import AnthropicAdapter
from ._config import AnthropicConfig

__all__ = ["AnthropicMessages"]


class AnthropicMessages(HttpModelPlugin):
    """Serves ``config.models`` (Claude models) from the Anthropic Messages API."""

    name = "llm-anthropic"
    Config = AnthropicConfig
    Adapter = AnthropicAdapter

    config: AnthropicConfig
    #: The adapter registered for the configured models (set by ``setup``).
    adapter: AnthropicAdapter
