"""Helpers of the llm-openai tests (the loopback server itself is in ``conftest.py``,
on ``tests/plugins/llm_http_support.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.plugins.llm_http_support import HTTPX_GC_WARNING, final_failure

if TYPE_CHECKING:
    from tests.plugins.llm_openai.conftest import OpenAIServer

__all__ = ["HTTPX_GC_WARNING", "final_failure", "stream_ok"]


def stream_ok(server: OpenAIServer, text: str = "ok") -> None:
    """Queue a short successful answer: ``text``, then finish ``stop``."""
    server.stream(server.delta(text), server.delta(finish="stop"), "[DONE]")
