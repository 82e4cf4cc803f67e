"""Claude models through the Anthropic Messages API.

YAML name ``llm-anthropic``; it injects ``llm`` and registers one adapter for its
configured ``models``. See this package's README.
"""

from __future__ import annotations

from ._adapter import AnthropicAdapter
from ._config import DEFAULT_BASE_URL, DEFAULT_VERSION, AnthropicConfig, ThinkingConfig
from ._plugin import AnthropicMessages
from ._wire import REDACTED, StreamDecoder, messages, request_body

plugin = AnthropicMessages

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_VERSION",
    "REDACTED",
    "AnthropicAdapter",
    "AnthropicConfig",
    "AnthropicMessages",
    "StreamDecoder",
    "ThinkingConfig",
    "messages",
    "plugin",
    "request_body",
]
