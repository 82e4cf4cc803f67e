"""Running one hook: exit status, output, stdin, the timeout and its process group."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import anyio
import pytest

from dsh.lifeline import LIFELINE
from dsh_hooks._runner import MAX_OUTPUT, run_hook
from tests.plugins.hooks.hook_support import gone, shell_hook

pytestmark = pytest.mark.anyio

ENV = {"PATH": "/usr/bin:/bin", "MARK": "m"}


async def test_a_hook_gets_the_payload_on_stdin_and_its_output_is_kept(tmp_path: Path) -> None:
    command = shell_hook(tmp_path, "h", 'echo out; echo err >&2; echo "$MARK"; exit 3')
    outcome = await run_hook(command, b'{"a": 1}', cwd=str(tmp_path), env=ENV, seconds=30)
    assert outcome.exit_code == 3
    assert outcome.stdout == "out\nm\n"
    assert outcome.stderr == "err\n"
    assert outcome.failure is None
    assert json.loads((tmp_path / "h.log").read_text()) == {"a": 1}


async def test_a_hook_runs_in_the_given_directory(tmp_path: Path) -> None:
    outcome = await run_hook(
        '[ . -ef "$WANT" ]', b"", cwd=str(tmp_path), env={**ENV, "WANT": str(tmp_path)}, seconds=30
    )
    assert outcome.exit_code == 0


async def test_a_hook_that_does_not_read_a_large_stdin_is_no_error(tmp_path: Path) -> None:
    outcome = await run_hook("exit 0", b"x" * (1 << 21), cwd=str(tmp_path), env=ENV, seconds=30)
    assert outcome.exit_code == 0
    assert outcome.failure is None


async def test_output_beyond_the_cap_is_dropped(tmp_path: Path) -> None:
    outcome = await run_hook(
        f"head -c {MAX_OUTPUT + 4096} /dev/zero", b"", cwd=str(tmp_path), env=ENV, seconds=30
    )
    assert outcome.exit_code == 0
    assert len(outcome.stdout) == MAX_OUTPUT


async def test_a_hanging_hook_is_killed_with_its_group_at_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    command = f'sleep 1000 & echo $! > "{pid_file}"; echo partial >&2; wait'
    outcome = await run_hook(command, b"", cwd=str(tmp_path), env=ENV, seconds=0.5)
    assert outcome.exit_code is None
    assert outcome.failure == "timed out after 0.5 s"
    assert outcome.stderr == "partial\n"
    assert gone(int(pid_file.read_text()))


async def test_a_background_child_left_by_a_hook_is_killed_when_it_exits(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # The child keeps the hook's stdout open: without the kill, reading would hang.
    outcome = await run_hook(
        f'sleep 1000 & echo $! > "{pid_file}"; echo done',
        b"",
        cwd=str(tmp_path),
        env=ENV,
        seconds=30,
    )
    assert (outcome.exit_code, outcome.stdout) == (0, "done\n")
    assert gone(int(pid_file.read_text()))


async def test_a_crashing_hook_reports_its_signal(tmp_path: Path) -> None:
    outcome = await run_hook("kill -SEGV $$", b"", cwd=str(tmp_path), env=ENV, seconds=30)
    assert outcome.exit_code == -11
    assert outcome.failure is None


async def test_a_hook_that_cannot_start_is_a_failure(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    outcome = await run_hook("true", b"", cwd=str(missing), env=ENV, seconds=30)
    assert outcome.exit_code is None
    assert outcome.failure is not None
    assert outcome.failure.startswith("cannot start bash: ")


async def test_a_cancelled_hook_is_killed_with_its_group_and_unwatched(tmp_path: Path) -> None:
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    command = f'sleep 1000 & echo $$ $! "$DSH_LIFELINE" > "{fifo}"; wait'
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(run_hook, command, b"", cwd=str(tmp_path), env=ENV, seconds=30)
            )
            said = await anyio.to_thread.run_sync(fifo.read_text)
            scope.cancel()
    hook, child, mark = said.split()
    assert mark == LIFELINE.token  # started under the lifeline: it dies with dsh too
    assert int(hook) not in LIFELINE.groups
    assert gone(int(hook))
    assert gone(int(child))
