"""The stdio transport itself: framing errors, and a server that ignores both stdin's
end and SIGTERM (RFC 0024: dsh starts the server under its lifeline)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError

from dsh.lifeline import LIFELINE
from dsh_mcp import _stdio
from tests.core.lifeline_support import wait_for
from tests.plugins.bash.bash_support import dies

pytestmark = pytest.mark.anyio


async def test_a_line_that_is_not_a_message_arrives_as_an_error(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}; echo not-json; cat > /dev/null"
    async with _stdio.stdio("sh", ["-c", script], dict(os.environ), tmp_path) as (read, _):
        with anyio.fail_after(30):
            received = await read.receive()
        pid = int(pid_file.read_text())
        assert pid in LIFELINE.groups
    assert isinstance(received, ValidationError)
    assert pid not in LIFELINE.groups
    await dies(pid)


async def test_a_server_deaf_to_stdin_and_sigterm_is_killed_with_its_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_stdio, "GRACE", 0.05)
    ready = tmp_path / "ready"
    script = (
        f"trap '' TERM; sleep 1000 & echo \"$$ $!\" > {ready}.tmp; mv {ready}.tmp {ready}; "
        "while :; do sleep 1; done"
    )
    async with _stdio.stdio("sh", ["-c", script], dict(os.environ), None):
        await anyio.to_thread.run_sync(wait_for, ready.exists, "the server")
    server, child = (int(pid) for pid in ready.read_text().split())
    await dies(server)
    await dies(child)
