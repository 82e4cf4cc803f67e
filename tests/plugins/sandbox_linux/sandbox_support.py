"""Helpers of the ``sandbox-linux`` tests: run a real command confined by a policy, and
which mechanisms this machine has."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import anyio
import pytest

from dsh import Context
from dsh.lifeline import open_process, reap
from dsh_sandbox import Launch, Sandbox, SandboxPolicy
from dsh_sandbox_linux import SandboxLinux

MECHANISMS = ("bubblewrap", "landlock")

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux mechanisms")


@cache
def available(mechanism: str) -> str | None:
    """None when ``mechanism`` works here, else why not (the reason of a skip)."""

    async def probe() -> str | None:
        async with Context() as root:
            await root.plugin(Sandbox)
            await root.plugin(SandboxLinux, {"mechanism": mechanism})
            try:
                await root.sandbox.probe()
            except Exception as exc:
                return str(exc)
        return None

    # in a thread of its own: the caller may be inside an event loop already
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, probe).result()


def require(mechanism: str) -> None:
    """Skip the test unless ``mechanism`` works on this machine."""
    why = available(mechanism)
    if why is not None:
        pytest.skip(why)


async def launch_for(mechanism: str, policy: SandboxPolicy) -> Launch:
    """The launch ``sandbox-linux`` (forced to ``mechanism``) gives for ``policy``."""
    async with Context() as root:
        await root.plugin(Sandbox)
        await root.plugin(SandboxLinux, {"mechanism": mechanism})
        launch: Launch = await root.sandbox.wrap(policy)
        return launch


async def confined(
    mechanism: str, policy: SandboxPolicy, script: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run ``bash -c script`` confined by ``policy``: its exit code and its output (both
    streams)."""
    launch = await launch_for(mechanism, policy)
    return await run(launch, ["bash", "-c", script], env=env, cwd=policy.cwd)


async def run(
    launch: Launch,
    command: Sequence[str],
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> tuple[int, str]:
    """Start ``command`` as an executor does with ``launch``; its exit code and output."""
    process = await open_process(
        launch.argv(command),
        env=env,
        cwd=cwd,
        preexec=launch.preexec,
        pass_fds=launch.pass_fds,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert process.stdout is not None
        output = b"".join([chunk async for chunk in process.stdout])
        code = await process.wait()
    finally:
        await reap(process)
    return code, output.decode(errors="replace")
