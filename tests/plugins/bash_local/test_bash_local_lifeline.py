"""A dsh process killed with SIGKILL while a command runs leaves nothing of it running:
the shell, its grandchildren, and a grandchild that left the group (RFC 0024)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.lifeline_support import kill_mid_call

#: Every test here runs a victim dsh process on each backend.
pytestmark = pytest.mark.parametrize("backend", ["asyncio", "trio"])


def test_sigkill_mid_command_kills_the_command_and_its_grandchildren(
    backend: str, tmp_path: Path
) -> None:
    assert kill_mid_call(backend, "bash", tmp_path) == []


def test_sigkill_mid_command_kills_a_grandchild_that_left_the_group(
    backend: str, tmp_path: Path
) -> None:
    assert kill_mid_call(backend, "setsid", tmp_path) == []
