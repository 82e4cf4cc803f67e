"""The MCP tests run on asyncio only (ARCHITECTURE §6.9): the ``mcp`` package's
transports and the uvicorn server of the streamable HTTP test are asyncio code."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
