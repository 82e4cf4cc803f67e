"""Checkpoints benchmark: what a checkpoint adds to ``write`` / ``edit`` and to a bash
call with ``snapshot_bash``.

Run: ``.venv/bin/python -m bench.checkpoints`` (``--quick`` for a smoke run: fewer
rounds, a 1,000-file tree).

* ``write`` / ``edit`` of a 1 MiB file through ``tools.execute``, each call with new
  content (so every checkpoint stores a new 1 MiB blob, synced: no deduplication helps),
  with the ``checkpoints`` plugin beside the same stack without it, interleaved. Goal:
  at most 1.3x.
* ``bash`` (``true``) through the seam on a 10,000-file tree with ``snapshot_bash``
  beside the same call without it: the first snapshot (every file hashed into the shadow
  repository), then steady state with one file changed between calls. Reported.

Sessions are in memory (no persistence plugin), so the rows measure the checkpoint
itself: the blob write and the event, not a session log's fsync.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from bench._timing import sample_async
from dsh import Context
from dsh.testing import ScriptedModel
from dsh_agent_core import AgentCore
from dsh_bash import Bash, BashRequest
from dsh_bash_local import LocalBash
from dsh_checkpoints import Checkpoints
from dsh_fs import Filesystem
from dsh_fs_local import FsLocal
from dsh_tool_fs import FsTools
from dsh_tools import ToolCall

MIB = 1 << 20


async def stack(stack: AsyncExitStack, workspace: Path, checkpoints: dict[str, Any] | None) -> Any:
    root = await stack.enter_async_context(Context())
    await root.plugin(
        AgentCore, {"agents": [{"id": "main", "model": "scripted", "cwd": str(workspace)}]}
    )
    ScriptedModel().install(root)
    for plugin in (Filesystem, FsLocal, FsTools, Bash, LocalBash):
        await root.plugin(plugin)
    if checkpoints is not None:
        await root.plugin(Checkpoints, checkpoints)
    return root


def ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


async def fs_rows(base: Path, rounds: int) -> None:
    async with AsyncExitStack() as exits:
        roots = {}
        for name, config in (("plain", None), ("checkpoints", {})):
            workspace = base / f"fs-{name}"
            workspace.mkdir()
            (workspace / "big.txt").write_text("a" * MIB)
            roots[name] = await stack(exits, workspace, config)
        count = [0]

        def writer(root: Any) -> Any:
            call = ToolCall("bench", agent=root.agents.get("main"))

            async def write() -> object:
                count[0] += 1
                body = f"{count[0]:08}\n" + "b" * (MIB - 9)
                return await root.tools.execute(
                    "write", {"file_path": "big.txt", "content": body}, call
                )

            return write

        def editor(root: Any) -> Any:
            call = ToolCall("bench", agent=root.agents.get("main"))

            async def edit() -> object:
                text = (await root.fs.read_text("big.txt", call)).text
                head = text[:8]
                count[0] += 1
                return await root.tools.execute(
                    "edit",
                    {"file_path": "big.txt", "old_string": head, "new_string": f"{count[0]:08}"},
                    call,
                )

            return edit

        for label, make in (("write", writer), ("edit", editor)):
            samples = await sample_async({n: make(r) for n, r in roots.items()}, rounds)
            plain, with_ckpt = ms(samples["plain"]), ms(samples["checkpoints"])
            print(
                f"{label} 1 MiB: {plain:.2f} ms plain, {with_ckpt:.2f} ms with checkpoints "
                f"({with_ckpt / plain:.2f}x; goal <= 1.3x)"
            )


async def bash_rows(base: Path, files: int, rounds: int) -> None:
    async with AsyncExitStack() as exits:
        roots = {}
        for name, config in (("plain", None), ("snapshot", {"snapshot_bash": True})):
            workspace = base / f"bash-{name}"
            for n in range(files):
                folder = workspace / f"d{n // 100:03}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"f{n:05}.py").write_text(f"value = {n}\n")
            roots[name] = await stack(exits, workspace, config)

        def runner(root: Any, workspace: Path) -> Any:
            session = root.agents.get("main").session
            request = BashRequest("true", cwd=str(workspace), session_id=session.id)
            count = [0]

            async def run() -> object:
                count[0] += 1
                (workspace / "d000" / "f00000.py").write_text(f"value = {count[0]}\n")
                return await root.bash.run(request)

            return run

        calls = {n: runner(r, base / f"bash-{n}") for n, r in roots.items()}
        start = time.perf_counter()
        await calls["snapshot"]()
        first = (time.perf_counter() - start) * 1e3
        samples = await sample_async(calls, rounds)
        plain, snap = ms(samples["plain"]), ms(samples["snapshot"])
        print(f"bash on {files} files: first snapshot call {first:.1f} ms")
        print(
            f"bash on {files} files, one file changed per call: {plain:.2f} ms plain, "
            f"{snap:.2f} ms with snapshot_bash ({snap / plain:.1f}x; reported)"
        )


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-bench-ckpt-") as folder:
        base = Path(folder)
        await fs_rows(base, 5 if quick else 40)
        await bash_rows(base, 1000 if quick else 10_000, 3 if quick else 15)


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv)
