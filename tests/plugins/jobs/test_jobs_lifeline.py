"""A background job does not outlive dsh: not its SIGKILL, not its normal exit
(RFC 0024)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.lifeline_support import kill_mid_call, start_victim, survivors

#: Every test here runs a victim dsh process on each backend.
pytestmark = pytest.mark.parametrize("backend", ["asyncio", "trio"])


def test_sigkill_while_a_job_runs_kills_the_job_and_its_grandchildren(
    backend: str, tmp_path: Path
) -> None:
    assert kill_mid_call(backend, "job", tmp_path) == []


def test_a_job_running_when_dsh_exits_normally_is_killed(backend: str, tmp_path: Path) -> None:
    victim, mark = start_victim(backend, "exit", tmp_path)
    assert survivors(victim, mark) == []
    assert victim.returncode == 0
