"""Shared test configuration: every async test runs on asyncio and on trio."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# Property tests judge behaviour, not speed: a loaded CI machine must not fail them by
# their per-example deadline or by slow input generation.
settings.register_profile("dsh", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("dsh")


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
