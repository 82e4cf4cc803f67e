"""The llm-anthropic tests' fixtures: a Messages API server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http_support import collect_garbage
from tests.plugins.llm_anthropic.anthropic_support import AnthropicServer
from tests.plugins.llm_http_support import serve


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield from collect_garbage()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnthropicServer]:
    """A scripted Messages API server on loopback (stopped at teardown)."""
    with serve(AnthropicServer, monkeypatch) as loopback:
        yield loopback
