"""Fixtures of the ``web-searxng`` tests: a fake SearXNG instance on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.plugins.web.web_support import serving
from tests.plugins.web_searxng.searxng_support import FakeSearxng


@pytest.fixture
def searxng() -> Iterator[FakeSearxng]:
    """A fake SearXNG on 127.0.0.1 (stopped at teardown)."""
    with serving() as site:
        yield FakeSearxng(site)
