"""Lifeline benchmark: what the first command of a process pays for its watcher.

Run: ``.venv/bin/python -m bench.lifeline`` (asyncio; ``--quick`` for a smoke run,
``--baseline REV`` for the revision to compare with, default ``main``).

The watcher starts with the first command a dsh process runs, and only then; since RFC
0053 that command waits until the watcher says it is armed (an interpreter start, ~10 ms
on a quiet machine) where before it waited only for the watcher's ``exec``. So each
sample is a fresh interpreter (``-I``, ``sys.path`` starting with the tree's root, the
editable install's finder not used; it asserts its ``dsh.lifeline`` is its tree's),
which times, in this order:

* ``first`` — ``open_process(["true"])``, its exit and ``reap``: the watcher's start
  included;
* ``later`` — the same call again (median of 5): the watcher runs;
* ``python`` — ``python -I -S -c pass`` run to its exit: the floor of any watcher
  written in Python.

``first - later`` is what the watcher costs the first command. The current tree and the
baseline's ``dsh/`` (``git archive``, into a temporary directory: the repository is not
changed) run in turn, round by round; medians; ratios from this one run.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: One sample, in a fresh interpreter: the three times, as seconds.
PROBE = """
import statistics, subprocess, sys, time
from pathlib import Path
import anyio
from dsh import lifeline
assert Path(lifeline.__file__).is_relative_to(sys.argv[1]), lifeline.__file__

async def command() -> float:
    start = time.perf_counter()
    process = await lifeline.open_process(["true"], stdin=subprocess.DEVNULL)
    await process.wait()
    await lifeline.reap(process)
    return time.perf_counter() - start

async def main() -> None:
    first = await command()
    later = statistics.median([await command() for _ in range(5)])
    start = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
    print(first, later, time.perf_counter() - start)

anyio.run(main)
"""


def baseline_tree(rev: str, folder: Path) -> Path:
    """``dsh/`` of ``rev``, extracted into ``folder``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev, "dsh"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def sample(tree: Path) -> tuple[float, float, float]:
    """``first``, ``later`` and ``python`` of one fresh interpreter on ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("DSH_LIFELINE", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tree)],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    )
    first, later, python = (float(value) for value in done.stdout.split())
    return first, later, python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--baseline", default="main", help="the revision to compare with")
    args = parser.parse_args()
    rounds = 5 if args.quick else 40
    with tempfile.TemporaryDirectory(prefix="dsh-bench-lifeline-") as tmp:
        trees = {"current": REPO, "baseline": baseline_tree(args.baseline, Path(tmp))}
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in trees}
        for _ in range(rounds):
            for name, tree in trees.items():
                samples[name].append(sample(tree))
    print(f"\nfirst command of a process, {rounds} fresh interpreters per tree (medians, ms)")
    extra = {}
    for name, rows in samples.items():
        first, later, python = (
            statistics.median(column) * 1e3 for column in zip(*rows, strict=True)
        )
        extra[name] = statistics.median(row[0] - row[1] for row in rows) * 1e3
        print(
            f"{name:<9} first {first:7.2f}   later {later:6.2f}   watcher (first - later) "
            f"{extra[name]:6.2f} = {extra[name] / python:4.2f}x python -I -S -c pass "
            f"({python:.2f})"
        )
    added = extra["current"] - extra["baseline"]
    print(
        f"watcher's cost to the first command, current / baseline {args.baseline}: "
        f"{extra['current'] / extra['baseline']:.2f}x ({added:+.2f} ms)"
    )


if __name__ == "__main__":
    main()
