"""OpenAI-compatible chat completions (DeepSeek, OpenAI, Ollama, vLLM, llama.cpp).

YAML name ``llm-openai``; it injects ``llm`` and registers one adapter for its
configured ``models``. See this package's README.
"""

from __future__ import annotations

from dsh_llm.http import retry_after

from ._adapter import OpenAIAdapter
from ._config import (
    DEFAULT_BASE_URL,
    FunctionChoice,
    OpenAICompatibleConfig,
    StepToolChoice,
    ToolChoice,
)
from ._plugin import OpenAICompatible
from ._wire import StreamDecoder, request_body

plugin = OpenAICompatible

__all__ = [
    "DEFAULT_BASE_URL",
    "FunctionChoice",
    "OpenAIAdapter",
    "OpenAICompatible",
    "OpenAICompatibleConfig",
    "StepToolChoice",
    "StreamDecoder",
    "ToolChoice",
    "plugin",
    "request_body",
    "retry_after",
]
