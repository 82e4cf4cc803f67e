"""The MCP tests run on asyncio only (ARCHITECTURE §6.9): the ``mcp`` package's
transports and the uvicorn server of the streamable HTTP test are asyncio code. A
command server's stderr log goes under the test's own ``XDG_STATE_HOME``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the servers' stderr logs go (``dsh/mcp/<server>.log`` under it)."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state
