"""The llm-openai tests' fixtures: a chat-completions server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http_support import collect_garbage
from tests.plugins.llm_http_support import serve
from tests.plugins.llm_openai.openai_support import OpenAIServer


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield from collect_garbage()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    """A scripted chat-completions server on loopback (stopped at teardown)."""
    with serve(OpenAIServer, monkeypatch) as loopback:
        yield loopback
