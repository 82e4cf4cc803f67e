"""Bash benchmark: what the shell tool costs on top of running the process yourself.

Run: ``.venv/bin/python -m bench.bash`` (asyncio backend; ``--quick`` for a smoke run,
``--trio`` for the trio backend). No peers to install: the floors are anyio's own.

Two workloads, each timed interleaved with its floor in the same process:

* per-call overhead: ``bash`` with the command ``true`` through ``root.tools.execute``
  (argument validation, the seam's checks, the environment scrub, a process group of
  its own, two stream pumps, the group kill at exit, the render) against the floor
  ``anyio.run_process(["bash", "-c", "true"])``. Goal: at most 1.3x.
* throughput: 100 MB of output (``head -c 100000000 /dev/zero | tr '\\0' a``) through
  the tool, which keeps the last 64000 bytes in memory and spills the first 64 MiB to a
  file, against reading the same pipe raw (``anyio.open_process``, every chunk received
  and dropped). Goal: at most 1.5x, and memory flat: the peak of Python allocations
  during one tool call (``tracemalloc``, an untimed run) stays near the cap, far below
  the 100 MB that went through.

Each tool call is checked (untimed) for its result, so the workload cannot shrink.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tracemalloc
from collections.abc import Awaitable, Callable

import anyio

from dsh import Context
from dsh_bash import Bash
from dsh_bash_local import LocalBash
from dsh_system_prompt import SystemPrompt
from dsh_tool_bash import ToolBash
from dsh_tools import ToolCall, Tools

from ._timing import sample_async

BIG = 100_000_000
BIG_COMMAND = f"head -c {BIG} /dev/zero | tr '\\0' a"


async def _raw_pipe() -> int:
    """The floor of the throughput workload: read the pipe to its end, keep nothing."""
    total = 0
    async with await anyio.open_process(
        ["bash", "-c", BIG_COMMAND], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as process:
        assert process.stdout is not None
        async for chunk in process.stdout:
            total += len(chunk)
    return total


def _ratio_line(name: str, samples: dict[str, list[float]], unit: float, label: str) -> float:
    tool, floor = (statistics.median(samples[k]) for k in ("dsh tool", "floor"))
    ratio = tool / floor
    print(
        f"{name:<28} dsh {tool * unit:9.3f} {label}   floor {floor * unit:9.3f} {label}   "
        f"ratio {ratio:5.2f}x"
    )
    return ratio


async def main(quick: bool) -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Bash)
        await root.plugin(LocalBash)
        await root.plugin(ToolBash)
        tools = root.tools
        call = ToolCall("bench")

        def check_true(name: str, result: object) -> None:
            if name == "dsh tool":
                assert getattr(result, "content", None) == "(no output)", result

        async def tool_true() -> object:
            return await tools.execute("bash", {"command": "true"}, call)

        async def floor_true() -> object:
            return await anyio.run_process(["bash", "-c", "true"])

        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "dsh tool": tool_true,
            "floor": floor_true,
        }
        await sample_async(calls, 5)  # warm up both paths
        per_call = await sample_async(calls, 20 if quick else 300, check_true)

        def check_big(name: str, result: object) -> None:
            if name == "dsh tool":
                content = getattr(result, "content", "")
                assert content.startswith("a" * 63_000), content[:80]
                assert "[output truncated; full output: " in content
            else:
                assert result == BIG

        async def tool_big() -> object:
            return await tools.execute("bash", {"command": BIG_COMMAND}, call)

        bulk: dict[str, Callable[[], Awaitable[object]]] = {
            "dsh tool": tool_big,
            "floor": _raw_pipe,
        }
        throughput = await sample_async(bulk, 2 if quick else 9, check_big)

        tracemalloc.start()
        await tool_big()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()

    print(f"\nbash tool vs its floors ({anyio_backend()} backend, medians)")
    first = _ratio_line("per call (`true`)", per_call, 1e3, "ms")
    second = _ratio_line("100 MB of output", throughput, 1e3, "ms")
    print(f"{'peak Python memory, 100 MB':<28} {peak / 1e6:.2f} MB (cap: 64000 bytes per stream)")
    print(
        f"goals: per call <= 1.3x ({'met' if first <= 1.3 else 'MISSED'}), "
        f"throughput <= 1.5x ({'met' if second <= 1.5 else 'MISSED'}), "
        f"memory flat ({'met' if peak < 10e6 else 'MISSED'})"
    )


def anyio_backend() -> str:
    return "trio" if "--trio" in sys.argv else "asyncio"


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv, backend=anyio_backend())
