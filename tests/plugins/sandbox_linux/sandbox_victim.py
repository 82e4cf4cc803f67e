"""A dsh runtime to be killed: ``python -m tests.plugins.sandbox_linux.sandbox_victim
BACKEND MECHANISM MARK READY``.

It loads ``sandbox`` and ``sandbox-linux`` (forced to MECHANISM) and runs, confined
(workspace-write on READY's folder), a command that starts two grandchildren, one of
them leaving its group with ``setsid``, with ``LIFELINE_TEST_MARK=MARK`` in the
environment. A line is written to the named pipe READY once everything runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

from dsh import Context
from dsh.lifeline import open_process
from dsh_sandbox import Sandbox, SandboxPolicy
from dsh_sandbox_linux import SandboxLinux

COMMAND = "setsid sleep 1000 & sleep 1000 & echo ready > {ready}; wait"


async def main(mechanism: str, mark: str, ready: Path) -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        await root.plugin(SandboxLinux, {"mechanism": mechanism})
        policy = SandboxPolicy("workspace-write", writable_roots=(str(ready.parent),))
        launch = await root.sandbox.wrap(policy)
        await open_process(
            launch.argv(["bash", "-c", COMMAND.format(ready=ready)]),
            env={**os.environ, "LIFELINE_TEST_MARK": mark},
            preexec=launch.preexec,
        )
        await anyio.sleep_forever()


if __name__ == "__main__":
    backend, mechanism, mark, ready = sys.argv[1:]
    anyio.run(main, mechanism, mark, Path(ready), backend=backend)
