"""Filesystem tools benchmark: grep, glob and read beside grep, find and readlines.

Run: ``.venv/bin/python -m bench.fs`` (``--quick`` for a smoke run: 1,000 files, 10 MB;
``--files N --megabytes M --rounds R``, ``--dir PATH`` to build the tree elsewhere than
the system temp directory).

One generated tree (default 10,000 files, 100 MB, 100 per directory, half ``.py`` and
half ``.txt``; about one file in ten holds a few ``needle_<n>`` lines). Each row is the
median wall time of one call, interleaved with its peers (one comparison at a time), the
tree warm in the page cache:

* ``grep``: the ``grep`` tool through ``tools.execute`` (walk, ``.gitignore`` rules,
  regex, the first 250 matches rendered) beside ``grep -rnE`` on the same tree. Goal: at
  most 2x.
* ``glob``: the ``glob`` tool (``**/*.py``, newest first, 100 shown) beside ``find -name
  '*.py' -type f``, and beside the same ``find`` printing each match's modification time
  (``-printf '%T@ %p'``: the stat per match that ordering newest first needs). Goal: at
  most 2x.
* ``read``: the ``read`` tool on a 2,000-line file (the whole page, numbered) beside a raw
  ``open().readlines()`` floor; the seam's ``fs.read_text`` alone is shown too (each
  sample is a batch of 20 calls). Goal: at most 3x.

Each call's result is checked (untimed) against its peer: the same number of matching
lines and of files, the whole page read, so the workload cannot shrink.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from dsh import Context
from dsh_fs import Filesystem
from dsh_fs_local import FsLocal
from dsh_system_prompt import SystemPrompt
from dsh_tool_fs import FsTools
from dsh_tools import ToolCall, Tools

PATTERN = "needle_[0-9]+"
PAGE_LINES = 2000
READ_BATCH = 20


def build_tree(base: Path, files: int, megabytes: int) -> Path:
    """``files`` files of about ``megabytes`` MB in total under ``base/tree``."""
    tree = base / "tree"
    size = megabytes * 1_000_000 // files
    rng = random.Random(12)
    words = [f"{w}{i}" for w in ("value", "count", "name", "item", "total") for i in range(40)]
    line_pool = [
        f"    {rng.choice(words)} = {rng.choice(words)}({rng.randrange(1000)})"
        f"  # {rng.choice(words)}\n"
        for _ in range(5000)
    ]
    for n in range(files):
        directory = tree / f"d{n // 100:03}"
        directory.mkdir(parents=True, exist_ok=True)
        lines: list[str] = []
        length = 0
        while length < size:
            line = rng.choice(line_pool)
            lines.append(line)
            length += len(line)
        if n % 10 == 3:
            for k in range(3):
                lines[rng.randrange(len(lines))] = f"def needle_{n}_{k}():\n"
        suffix = ".py" if n % 2 else ".txt"
        (directory / f"f{n:05}{suffix}").write_text("".join(lines))
    return tree


def page_file(base: Path) -> Path:
    """A file whose first page is :data:`PAGE_LINES` short lines, shown whole."""
    path = base / "page.py"
    path.write_text("".join(f"x_{i} = {i} + 1\n" for i in range(PAGE_LINES)))
    return path


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return done.stdout


def _found(text: str) -> int:
    match = re.match(r"Found (\d+) match", text)
    return int(match.group(1)) if match else 0


def _listed(text: str) -> int:
    match = re.search(r"of (\d+) files", text)
    return int(match.group(1)) if match else len(text.splitlines())


async def _sample(fn: Callable[[], Awaitable[Any]], batch: int, samples: list[float]) -> Any:
    """Time ``batch`` calls of ``fn``; record seconds per call; return the last result."""
    start = time.perf_counter()
    result = await fn()
    for _ in range(batch - 1):
        result = await fn()
    samples.append((time.perf_counter() - start) / batch)
    return result


async def run(files: int, megabytes: int, rounds: int, base: Path) -> None:
    started = time.perf_counter()
    tree = build_tree(base, files, megabytes)
    page = page_file(base)
    built = time.perf_counter() - started
    call = ToolCall(id="bench")
    async with Context() as root:
        for plugin in (SystemPrompt, Tools, Filesystem):
            await root.plugin(plugin)
        await root.plugin(FsLocal, {"root": str(base)})
        await root.plugin(FsTools)
        tools = root.tools

        async def grep() -> Any:
            return await tools.execute("grep", {"pattern": PATTERN, "path": str(tree)}, call)

        async def glob() -> Any:
            return await tools.execute("glob", {"pattern": "**/*.py", "path": str(tree)}, call)

        async def read() -> Any:
            return await tools.execute("read", {"file_path": str(page)}, call)

        async def read_text() -> Any:
            return await root.fs.read_text(str(page))

        async def peer_grep() -> str:
            return await anyio.to_thread.run_sync(_run, ["grep", "-rnE", PATTERN, str(tree)])

        async def peer_find() -> str:
            argv = ["find", str(tree), "-name", "*.py", "-type", "f"]
            return await anyio.to_thread.run_sync(_run, argv)

        async def peer_find_mtime() -> str:
            # What newest-first needs: the modification time of every match.
            argv = ["find", str(tree), "-name", "*.py", "-type", "f", "-printf", "%T@ %p\n"]
            return await anyio.to_thread.run_sync(_run, argv)

        async def floor() -> list[str]:
            with open(page) as f:  # noqa: ASYNC230 (the floor is the blocking read itself)
                return f.readlines()

        pairs: dict[str, dict[str, Callable[[], Awaitable[Any]]]] = {
            "grep": {"dsh grep tool": grep, "grep -rnE": peer_grep},
            "glob": {
                "dsh glob tool": glob,
                "find -printf %T@": peer_find_mtime,
                "find -name": peer_find,
            },
            "read": {"dsh read tool": read, "dsh fs.read_text": read_text, "readlines()": floor},
        }
        samples: dict[str, list[float]] = {name: [] for fns in pairs.values() for name in fns}
        # One comparison at a time, its rows interleaved; the first call of each warms
        # the page cache and the code path. A read is quick: each sample is a batch.
        for group, fns in pairs.items():
            batch = READ_BATCH if group == "read" else 1
            for fn in fns.values():
                await fn()
            for _ in range(rounds * (3 if batch > 1 else 1)):
                results = {
                    name: await _sample(fn, batch, samples[name]) for name, fn in fns.items()
                }
                _check(group, results)
    medians = {name: statistics.median(s) for name, s in samples.items()}
    print(
        f"\nfs tools: {files} files, {megabytes} MB (built in {built:.1f} s), {rounds} rounds, "
        f"median per call, in {base}"
    )
    width = max(map(len, medians))
    for group, fns in pairs.items():
        names = list(fns)
        peer = names[-1]
        print(f"\n{group}")
        for name in names:
            ratio = medians[name] / medians[peer]
            print(f"  {name:<{width}}  {medians[name] * 1e3:>9.2f} ms  {ratio:>6.2f}x {peer}")
    print(
        f"\nratios: grep {medians['dsh grep tool'] / medians['grep -rnE']:.2f}x (goal <= 2), "
        f"glob {medians['dsh glob tool'] / medians['find -name']:.2f}x (goal <= 2; "
        f"{medians['dsh glob tool'] / medians['find -printf %T@']:.2f}x find with mtimes), "
        f"read {medians['dsh read tool'] / medians['readlines()']:.2f}x (goal <= 3)"
    )


def _check(group: str, results: dict[str, Any]) -> None:
    if group == "grep":
        ours, peer = results.values()
        assert _found(ours.content) == len(peer.splitlines()) > 0, ours.content[:200]
    elif group == "glob":
        ours, *peers = results.values()
        for peer in peers:
            assert _listed(ours.content) == len(peer.splitlines()) > 0, ours.content[:200]
    else:
        tool, text, lines = results.values()
        assert f"(End of file - total {PAGE_LINES} lines)" in tool.content
        assert text.text.count("\n") == len(lines) == PAGE_LINES


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 files, 10 MB, 3 rounds")
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="where to build the tree")
    args = parser.parse_args(argv)
    files, megabytes, rounds = (
        (1_000, 10, 3) if args.quick else (args.files, args.megabytes, args.rounds)
    )
    base = Path(tempfile.mkdtemp(prefix="dsh-bench-fs-", dir=args.dir))
    try:
        anyio.run(run, files, megabytes, rounds, base)
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
