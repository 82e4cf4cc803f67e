"""The ``llm-openai`` plugin: one adapter, one HTTP client, both undone on unload."""

from __future__ import annotations

from dsh_llm.http import HttpModelPlugin

from ._adapter import OpenAIAdapter
from ._config import OpenAICompatibleConfig

__all__ = ["OpenAICompatible"]


class OpenAICompatible(HttpModelPlugin):
    """Serves ``config.models`` from an OpenAI-compatible chat-completions server."""

    name = "llm-openai"
    Config = OpenAICompatibleConfig
    Adapter = OpenAIAdapter

    config: OpenAICompatibleConfig
    #: The adapter registered for the configured models (set by ``setup``).
    adapter: OpenAIAdapter
