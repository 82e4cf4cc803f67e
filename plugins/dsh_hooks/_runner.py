"""Running one command hook: ``bash -c`` in its own process group, JSON on stdin."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from dsh.lifeline import open_process, reap

__all__ = ["MAX_OUTPUT", "Outcome", "run_hook"]

#: Bytes kept of a hook's stdout and of its stderr (the rest is read and dropped).
MAX_OUTPUT = 1 << 20


@dataclass(frozen=True)
class Outcome:
    """How a hook ended: its exit status (None when it did not exit by itself), what
    it wrote, and, when it did not run to its end, why (``timed out after 5 s``,
    ``cannot start bash: ...``)."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    failure: str | None = None


async def run_hook(
    command: str, payload: bytes, *, cwd: str, env: Mapping[str, str], seconds: float
) -> Outcome:
    """Run ``command`` with ``payload`` on stdin; after ``seconds`` (or when the
    caller is cancelled) its whole process group is killed. What is left of the group
    when the command exits is killed too, so a forgotten background child cannot hold
    its pipes open. Never raises but for cancellation."""
    try:
        with anyio.CancelScope(shield=True):  # a started process is always reaped
            process = await open_process(
                ["bash", "-c", command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
            )
    except OSError as exc:
        return Outcome(None, failure=f"cannot start bash: {exc}")
    out = bytearray()
    err = bytearray()
    try:
        with anyio.move_on_after(seconds) as deadline:
            async with anyio.create_task_group() as tg:
                assert process.stdin is not None
                assert process.stdout is not None
                assert process.stderr is not None
                tg.start_soon(_feed, process.stdin, payload)
                tg.start_soon(_drain, process.stdout, out)
                tg.start_soon(_drain, process.stderr, err)
                await process.wait()
                _kill_group(process)
    finally:
        _kill_group(process)
        await reap(process)
    failure = f"timed out after {seconds:g} s" if deadline.cancelled_caught else None
    return Outcome(
        None if failure else process.returncode,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        failure,
    )


async def _feed(stream: ByteSendStream, payload: bytes) -> None:
    # A hook that exits without reading its stdin closes the pipe: that is no error.
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(payload)
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()


async def _drain(stream: ByteReceiveStream, into: bytearray) -> None:
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
        while True:
            chunk = await stream.receive()
            into.extend(chunk[: max(0, MAX_OUTPUT - len(into))])


def _kill_group(process: Process) -> None:
    # Gone already (nothing left in the group), or a member we may not signal.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
