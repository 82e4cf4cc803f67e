"""A stdio MCP server (and what it started) does not outlive a dsh process killed with
SIGKILL (RFC 0024)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.lifeline_support import kill_mid_call

#: Every test here runs a victim dsh process on each backend.
pytestmark = pytest.mark.parametrize("backend", ["asyncio", "trio"])


def test_sigkill_while_a_stdio_server_runs_kills_it_and_its_child(
    backend: str, tmp_path: Path
) -> None:
    assert kill_mid_call(backend, "mcp", tmp_path) == []
