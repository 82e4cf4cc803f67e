"""When dsh dies (SIGKILL), every process of a sandboxed command dies with it: the
bwrap processes and what runs inside, a grandchild that left its group included."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.core.lifeline_support import ROOT, await_line, marked, ready_pipe, survivors
from tests.plugins.sandbox_linux.sandbox_support import linux_only, require

pytestmark = linux_only


# bubblewrap on both backends (on trio, bwrap runs without --die-with-parent); the
# Landlock path is the same on either
@pytest.mark.parametrize(
    ("mechanism", "backend"),
    [("bubblewrap", "asyncio"), ("bubblewrap", "trio"), ("landlock", "asyncio")],
)
def test_sigkill_of_dsh_kills_every_process_of_a_sandboxed_command(
    tmp_path: Path, mechanism: str, backend: str
) -> None:
    require(mechanism)
    mark = f"sandbox-{uuid.uuid4().hex}"
    ready = ready_pipe(tmp_path)
    victim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.plugins.sandbox_linux.sandbox_victim",
            backend,
            mechanism,
            mark,
            str(ready),
        ],
        cwd=ROOT,
    )
    assert await_line(ready, victim.pid), "the victim ended before its command ran"
    running = marked(mark)
    # bash, two sleeps (and bwrap's two processes)
    assert len(running) >= (5 if mechanism == "bubblewrap" else 3), running
    victim.kill()
    assert survivors(victim, mark) == []
