"""Shared test configuration: every async test runs on asyncio and on trio."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@pytest.fixture(autouse=True)
def restore_dsh_logger() -> Iterator[None]:
    """``dsh.cli.main`` configures the "dsh" logger for a terminal; undo it afterwards."""
    logger = logging.getLogger("dsh")
    saved = (logger.handlers[:], logger.propagate, logger.level)
    yield
    logger.handlers[:], logger.propagate, logger.level = saved[0], saved[1], saved[2]
