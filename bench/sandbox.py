"""Sandbox benchmark: what confining a command costs on top of starting it unconfined.

Run: ``.venv/bin/python -m bench.sandbox`` (asyncio backend; ``--quick`` for a smoke
run, ``--trio`` for the trio backend, where the raw asyncio row is left out). Needs
bubblewrap (the ``sandbox`` extra) and a kernel with Landlock for the two sandboxed
rows; a mechanism that does not work here is skipped with the reason.

Each row starts ``bash -c true`` with stdin from ``/dev/null`` and both streams on pipes,
reads them to their end and waits for the exit, interleaved round by round:

* ``bubblewrap`` / ``landlock`` — ``sandbox.wrap(policy)`` (a workspace-write policy as
  ``bash-local`` builds it: the current directory and the temp dir writable, the
  ``fs-local`` default ``deny_read`` list, no network), then
  ``dsh.lifeline.open_process`` with the launch, as an executor does;
* ``unsandboxed`` — ``dsh.lifeline.open_process`` alone (a new session, the lifeline's
  mark and watch);
* ``raw asyncio`` — ``asyncio.create_subprocess_exec``, the floor.

Goal (issue 25): each sandboxed row at most 1.5x the unsandboxed one.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import anyio

from dsh import Context
from dsh.lifeline import open_process, reap
from dsh_sandbox import Launch, Sandbox, SandboxPolicy, SandboxUnavailableError
from dsh_sandbox_linux import SandboxLinux

from ._timing import sample_async

COMMAND = ["bash", "-c", "true"]
POLICY = SandboxPolicy(
    "workspace-write",
    writable_roots=(os.getcwd(), tempfile.gettempdir()),
    deny_read=("~/.ssh/**", "~/.aws/**", "~/.gnupg/**"),
    cwd=os.getcwd(),
)


async def _started(launch: Launch) -> int:
    process = await open_process(
        launch.argv(COMMAND),
        preexec=launch.preexec,
        pass_fds=launch.pass_fds,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        assert process.stderr is not None
        async for _ in process.stdout:
            pass
        async for _ in process.stderr:
            pass
        return await process.wait()
    finally:
        await reap(process)


async def _raw() -> int:
    process = await asyncio.create_subprocess_exec(
        *COMMAND,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    await process.communicate()
    return process.returncode or 0


async def _mechanism(stack: AsyncExitStack, name: str) -> Callable[[], Awaitable[object]] | str:
    """The row of ``name`` (wrap, then start) on a runtime of its own, or why it cannot
    run here."""
    root = await stack.enter_async_context(Context())
    await root.plugin(Sandbox)
    await root.plugin(SandboxLinux, {"mechanism": name})
    sandbox = root.sandbox
    try:
        await sandbox.probe()
    except SandboxUnavailableError as exc:
        return str(exc)

    async def row() -> object:
        return await _started(await sandbox.wrap(POLICY))

    return row


def _check(name: str, result: object) -> None:
    assert result == 0, (name, result)


async def main(quick: bool, backend: str) -> None:
    calls: dict[str, Callable[[], Awaitable[object]]] = {}
    skipped: list[str] = []
    async with AsyncExitStack() as stack:
        for name in ("bubblewrap", "landlock"):
            found = await _mechanism(stack, name)
            if isinstance(found, str):
                skipped.append(f"{name}: {found}")
            else:
                calls[name] = found
        calls["unsandboxed"] = lambda: _started(Launch(mechanism="unconfined"))
        if backend == "asyncio":
            calls["raw asyncio"] = _raw
        await sample_async(calls, 5, _check)  # warm up every path
        samples = await sample_async(calls, 20 if quick else 200, _check)

    medians = {name: statistics.median(times) for name, times in samples.items()}
    base = medians["unsandboxed"]
    print(f"\nbash -c true, sandboxed vs not ({backend} backend, medians)")
    for name, median in medians.items():
        line = f"{name:<12} {median * 1e3:8.3f} ms   {median / base:5.2f}x unsandboxed"
        if "raw asyncio" in medians:
            line += f"   {median / medians['raw asyncio']:5.2f}x raw asyncio"
        print(line)
    for line in skipped:
        print(f"skipped {line}")
    verdicts = [
        f"{name} {'met' if medians[name] <= 1.5 * base else 'MISSED'}"
        for name in ("bubblewrap", "landlock")
        if name in medians
    ]
    print(f"goal: sandboxed <= 1.5x unsandboxed ({', '.join(verdicts) or 'nothing measured'})")


if __name__ == "__main__":
    backend = "trio" if "--trio" in sys.argv else "asyncio"
    anyio.run(main, "--quick" in sys.argv, backend, backend=backend)
