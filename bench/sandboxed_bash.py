"""Sandboxed bash benchmark: what the sandbox costs a ``bash`` tool call.

Run: ``.venv/bin/python -m bench.sandboxed_bash`` (asyncio backend; ``--quick`` for a
smoke run, ``--trio`` for the trio backend). Needs bubblewrap (the ``sandbox`` extra)
and a kernel with Landlock for the two sandboxed rows; a mechanism that does not work
here is left out with the reason.

The tool-level path (``bench.sandbox`` times the mechanisms under ``open_process``):
``bash`` with the command ``true`` through ``root.tools.execute`` in one runtime per
row, interleaved round by round —

* ``bubblewrap`` / ``landlock`` — ``bash-local`` with ``sandbox: workspace-write`` (its
  defaults: the cwd and the temp dir writable, fs-local's ``deny_read``, no network) and
  ``sandbox-linux`` on that mechanism;
* ``unsandboxed`` — ``bash-local`` with ``sandbox: off``.

Goal (issue 25): each sandboxed row at most 1.5x the unsandboxed one.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio

from dsh import Context
from dsh_bash import Bash
from dsh_bash_local import LocalBash
from dsh_sandbox import Sandbox, SandboxUnavailableError
from dsh_sandbox_linux import SandboxLinux
from dsh_system_prompt import SystemPrompt
from dsh_tool_bash import ToolBash
from dsh_tools import ToolCall, Tools

from ._timing import sample_async

GOAL = 1.5


async def _runtime(stack: AsyncExitStack, mechanism: str | None) -> Any:
    """A runtime with the bash tool, sandboxed by ``mechanism`` (None: off); its tools
    service, or None when the mechanism does not work here (the reason is printed)."""
    root = await stack.enter_async_context(Context())
    await root.plugin(SystemPrompt)
    await root.plugin(Tools)
    local: dict[str, str] = {}
    if mechanism is not None:
        await root.plugin(Sandbox)
        await root.plugin(SandboxLinux, {"mechanism": mechanism})
        try:
            await root.sandbox.probe()
        except SandboxUnavailableError as exc:
            print(f"{mechanism}: left out ({exc})")
            return None
        local = {"sandbox": "workspace-write"}
    await root.plugin(Bash)
    await root.plugin(LocalBash, local)
    await root.plugin(ToolBash)
    return root.tools


async def main(quick: bool) -> None:
    call = ToolCall("bench")
    calls: dict[str, Callable[[], Awaitable[object]]] = {}
    async with AsyncExitStack() as stack:
        for name, mechanism in (
            ("unsandboxed", None),
            ("bubblewrap", "bubblewrap"),
            ("landlock", "landlock"),
        ):
            tools = await _runtime(stack, mechanism)
            if tools is not None:

                async def tool_true(tools: Any = tools) -> object:
                    return await tools.execute("bash", {"command": "true"}, call)

                calls[name] = tool_true

        def check(name: str, result: object) -> None:
            assert getattr(result, "content", None) == "(no output)", (name, result)

        await sample_async(calls, 5, check)  # warm up every path
        samples = await sample_async(calls, 20 if quick else 300, check)

    base = statistics.median(samples["unsandboxed"])
    print(f"\nbash tool call (`true`), sandboxed vs not ({anyio_backend()} backend, medians)")
    print(f"{'unsandboxed':<12} {base * 1e3:8.3f} ms")
    missed = []
    for name in ("bubblewrap", "landlock"):
        if name in samples:
            ratio = statistics.median(samples[name]) / base
            print(f"{name:<12} {statistics.median(samples[name]) * 1e3:8.3f} ms  {ratio:5.2f}x")
            if ratio > GOAL:
                missed.append(name)
    verdict = f"MISSED: {', '.join(missed)}" if missed else "met"
    print(f"goal: each sandboxed row <= {GOAL}x ({verdict})")


def anyio_backend() -> str:
    return "trio" if "--trio" in sys.argv else "asyncio"


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv, backend=anyio_backend())
