"""Helpers of the llm-openai tests (the loopback server itself is in ``conftest.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from dsh_llm import Chunk, Finish, LlmFailure

if TYPE_CHECKING:
    from tests.plugins.llm_openai.conftest import LoopbackServer

#: A stream the adapter stops reading early leaves httpx's nested body generators
#: unexhausted; trio warns when they are collected (encode/httpx#3686). The
#: connection itself is closed: the cancellation tests check the server sees it.
HTTPX_GC_WARNING = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)\.:ResourceWarning"
)


def final_failure(chunks: list[Chunk]) -> LlmFailure:
    """The failure of a stream's final ``Finish("error")`` chunk."""
    assert len(chunks) >= 1
    last = chunks[-1]
    assert isinstance(last, Finish)
    assert last.reason == "error", last
    assert last.failure is not None
    return last.failure


def stream_ok(server: LoopbackServer, text: str = "ok") -> None:
    """Queue a short successful answer: ``text``, then finish ``stop``."""
    server.stream(server.delta(text), server.delta(finish="stop"), "[DONE]")
