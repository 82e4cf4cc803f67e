"""Fixtures of the ``web-fetch`` tests: the loopback site."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.plugins.web.web_support import Site, serving


@pytest.fixture
def site() -> Iterator[Site]:
    """A scripted site on 127.0.0.1 (stopped at teardown)."""
    with serving() as running:
        yield running
