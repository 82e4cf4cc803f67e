"""The HTTP core's tests run against every adapter built on it: the fixture ``server`` is
one scripted loopback server per adapter (``openai``, ``anthropic``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http_support import collect_garbage
from tests.plugins.llm_anthropic.anthropic_support import AnthropicServer
from tests.plugins.llm_http_support import LoopbackServer, serve
from tests.plugins.llm_openai.openai_support import OpenAIServer


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield from collect_garbage()


@pytest.fixture(params=[OpenAIServer, AnthropicServer], ids=["openai", "anthropic"])
def server(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LoopbackServer]:
    """A scripted server of one adapter's API on loopback (stopped at teardown)."""
    with serve(request.param, monkeypatch) as loopback:
        yield loopback
