"""Unused-capability benchmark: what issues 25 to 30 cost a deployment that does not use them.

Run: ``.venv/bin/python -m bench.unused`` (asyncio; ``--quick`` for a smoke run,
``--baseline REV`` for another baseline revision, default :data:`BASELINE`: main just
before the first sandbox merge of issue 25).

One table, two groups of rows; every ratio comes from this one run, rounds interleaved
row by row, medians; CPU time of the process doing the work (``time.process_time``:
what other processes on a shared machine disturb least) with the wall-time ratio
beside it; and cProfile's Python calls per op, which do not depend on the load: an
unused capability should add ~0 of them.

* **Across revisions**: the current tree against the baseline revision, checked out
  in a throwaway ``git worktree add --detach`` (removed at the end). Each tree runs in
  its own worker interpreter (``-I``, ``sys.path`` starting with the tree's root and
  ``plugins/``, the editable install's finder taken out; the worker asserts every
  ``dsh``/``dsh_*`` package it loaded is from its tree), rounds alternating current,
  baseline, current, baseline. The workloads (``bench/_unused_driver.py``) use only
  what the baseline had: a turn of 20 tool steps of an in-memory ``echo`` tool on a
  scripted model (per step; the calls are the slope between 10 and 20 steps, and the
  whole turn), a ``bash`` tool call of ``true`` through bash-local (sandbox off, the
  default), a ``write`` and an ``edit`` of a 1 KiB file through tool-fs / fs-local (no
  checkpoints plugin: the fs commit-hook path empty), and agent-core mounted and
  disposed. Ratio: current / baseline.
* **In-process, present but unused vs absent** (current tree): deployments in a
  temporary directory (the working directory while they run), each beside the plain
  deployment of its workload: the echo turn with ``hooks`` (no hooks,
  ``claude_settings: false``), ``permissions`` (empty rule lists, ``claude_settings:
  false``), ``otel`` (``enabled: false``), ``plan-mode`` (no
  agent in plan mode), ``skills`` (no skill folders, ``user: false``), ``hot-reload``
  (``watch: false``: nothing watching) and all of them at once; a ``bash`` call with
  ``sandbox`` + ``sandbox-linux`` loaded and bash-local's ``sandbox: off``, and with
  ``checkpoints`` loaded (``snapshot_bash: false``); a ``write`` / ``edit`` after
  ``checkpoints`` was loaded and unloaded again (its commit hook removed). Ratio: the
  row / the plain row of its group. (agent-core itself mounts ``slash-commands``.)

The calls of a ``bash`` call include the event loop's wakeups while the child runs,
which vary with the load (tens of calls); every other workload's are exact.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bench._unused_driver import (
    STEPS,
    STEPS_SHORT,
    EchoTurn,
    Op,
    OpenRoot,
    bash_op,
    calls_of,
    fs_ops,
    loaded_from,
    roots,
    time_op,
)
from dsh import Context, load_deployment
from dsh_checkpoints import Checkpoints

#: main just before issue 25's work: the parent of the first sandbox merge (532d2ff).
BASELINE = "415b6f0"
REPO = Path(__file__).resolve().parents[1]

#: The worker interpreter's start: its tree first on ``sys.path`` (root and
#: ``plugins/``, as pyproject maps the packages), the editable install's finders out,
#: then the driver (the current tree's ``bench/``, as a top-level module) serves.
BOOT = """\
import os, pathlib, sys
tree, bench, folder = sys.argv[1:4]
editable = lambda f: getattr(f, "__module__", "").startswith("__editable__")
sys.meta_path[:] = [f for f in sys.meta_path if not editable(f)]
sys.path_hooks[:] = [h for h in sys.path_hooks if not editable(h)]
sys.path[:0] = [tree, os.path.join(tree, "plugins"), bench]
import anyio, _unused_driver
anyio.run(_unused_driver.serve, pathlib.Path(tree), pathlib.Path(folder))
"""

#: Ops per timed sample, by workload.
OPS = {"turn": 2, "bash": 10, "write": 20, "edit": 20, "mount": 10}


@dataclass
class Stats:
    """One row's samples (CPU and wall seconds per op) and calls per op."""

    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    calls: int = 0
    #: Calls of the short turn (turn rows only): the per-step slope's other end.
    calls_short: int = 0

    def add(self, sample: tuple[float, float]) -> None:
        self.cpu.append(sample[0])
        self.wall.append(sample[1])


# -- across revisions -------------------------------------------------------------------


class Worker:
    """A worker interpreter serving the driver's workloads from ``tree``."""

    def __init__(self, tree: Path, folder: Path) -> None:
        command = [sys.executable, "-I", "-c", BOOT, str(tree), str(REPO / "bench"), str(folder)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=folder
        )

    def ask(self, **question: object) -> dict[str, Any]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(json.dumps(question) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the worker died (exit {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def median_calls(self, workload: str) -> int:
        """The median of three call counts of one op of ``workload``."""
        return int(statistics.median(self.ask(calls=workload)["calls"] for _ in range(3)))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


@contextmanager
def baseline_worktree(rev: str, folder: Path) -> Iterator[Path]:
    """A detached worktree of ``rev`` in ``folder``, removed on the way out."""
    git = ["git", "-C", str(REPO)]
    subprocess.run([*git, "worktree", "add", "-q", "--detach", str(folder), rev], check=True)
    try:
        yield folder
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(folder)], check=True)


def across_revisions(rev: str, rounds: int) -> dict[str, dict[str, Stats]]:
    """Per workload, per tree (``current``, ``baseline``): the samples and calls."""
    stats: dict[str, dict[str, Stats]] = {w: {} for w in OPS}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-unused-") as tmp:
        base = Path(tmp)
        trees = {"current": REPO}
        with baseline_worktree(rev, base / "baseline") as baseline:
            trees["baseline"] = baseline
            workers = {}
            for name, tree in trees.items():
                (base / f"work-{name}").mkdir()
                workers[name] = Worker(tree, base / f"work-{name}")
            try:
                for name, worker in workers.items():
                    where = worker.ask(where=1)
                    print(f"{name:>8}: dsh from {where['dsh']} ({where['packages']} packages)")
                for workload, ops in OPS.items():  # warm up every path
                    for worker in workers.values():
                        worker.ask(time=workload, ops=ops)
                for _ in range(rounds):
                    for workload, ops in OPS.items():
                        for name, worker in workers.items():
                            answer = worker.ask(time=workload, ops=ops)
                            row = stats[workload].setdefault(name, Stats())
                            row.add((answer["cpu"], answer["wall"]))
                for workload in OPS:
                    for name, worker in workers.items():
                        row = stats[workload][name]
                        row.calls = worker.median_calls(workload)
                        if workload == "turn":
                            row.calls_short = worker.median_calls("turn-short")
            finally:
                for worker in workers.values():
                    worker.close()
    return stats


# -- in-process: present but unused vs absent ------------------------------------------

_CORE = "- {name: agent-core, config: {max_steps: 40}}\n"
_BASH = _CORE + "- {name: fs}\n- {name: fs-local}\n- {name: bash}\n- {name: bash-local}\n"
_BASH += "- {name: tool-bash}\n"
_FS = _CORE + "- {name: fs}\n- {name: fs-local}\n- {name: tool-fs}\n"

#: The echo turn's rows: the entries added to agent-core ("" is the plain row).
TURN_ROWS = {
    "plain: agent-core + echo": "",
    "hooks: no hooks, claude_settings false": "- {name: hooks, config: {claude_settings: false}}",
    "permissions: no rules, claude_settings false": (
        "- {name: permissions, config: {claude_settings: false}}"
    ),
    "otel: enabled false": "- {name: otel, config: {enabled: false}}",
    "plan-mode: not in plan mode": "- {name: plan-mode}",
    "skills: no skill folders, user false": "- {name: skills, config: {user: false}}",
    "hot-reload: watch false": "- {name: hot-reload, config: {watch: false}}",
}
TURN_ROWS["all of the above"] = "\n".join(
    dict.fromkeys(line for extra in TURN_ROWS.values() for line in extra.splitlines())
)
#: The bash call's rows, added to agent-core + fs + bash.
BASH_ROWS = {
    "plain: bash-local, sandbox off": "",
    "sandbox + sandbox-linux loaded, sandbox off": "- {name: sandbox}\n- {name: sandbox-linux}",
    "checkpoints: snapshot_bash false": "- {name: checkpoints}",
}
#: The fs rows: plain, and after checkpoints was loaded and unloaded.
FS_ROWS = ("plain: tool-fs, no checkpoints", "checkpoints loaded, then unloaded")


@dataclass(frozen=True)
class Row:
    """An in-process row: its workload, its op and (a turn) the shorter turn's."""

    workload: str
    op: Op
    short: Op | None = None
    stats: Stats = field(default_factory=Stats)


#: Groups of rows by title, each group's first row the plain one.
Groups = dict[str, dict[str, Row]]


async def _deployment(open_root: OpenRoot, folder: Path, entries: str) -> Context:
    await anyio.Path(folder).mkdir()
    await anyio.Path(folder / "dsh.yml").write_text(entries)
    root = await open_root()
    await load_deployment(folder / "dsh.yml", root)
    return root


async def in_process_rows(open_root: OpenRoot, base: Path) -> Groups:
    """Every in-process row, built in its own deployment under ``base``."""
    turns, bash, writes, edits = {}, {}, {}, {}
    for n, (name, extra) in enumerate(TURN_ROWS.items()):
        turn = EchoTurn(await _deployment(open_root, base / f"turn-{n}", _CORE + extra + "\n"))
        turns[name] = Row("turn", turn.op(STEPS), turn.op(STEPS_SHORT))
    for n, (name, extra) in enumerate(BASH_ROWS.items()):
        root = await _deployment(open_root, base / f"bash-{n}", _BASH + extra + "\n")
        bash[name] = Row("bash", bash_op(root))
    for n, name in enumerate(FS_ROWS):
        folder = base / f"fs-{n}"
        root = await _deployment(open_root, folder, _FS)
        if n:
            fiber = await root.plugin(Checkpoints)
            await fiber.dispose()
        write, edit = fs_ops(root, folder)
        await write()  # the file edit changes
        writes[name], edits[name] = Row("write", write), Row("edit", edit)
    return {"echo turn": turns, "bash call": bash, "fs write": writes, "fs edit": edits}


async def in_process(rounds: int) -> Groups:
    """The in-process rows with their samples and calls."""
    home = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-unused-") as tmp:
        os.chdir(tmp)
        try:
            async with roots() as open_root:
                groups = await in_process_rows(open_root, Path(tmp))
                loaded_from(REPO)
                rows = [row for group in groups.values() for row in group.values()]
                for row in rows:  # warm up every path
                    await time_op(row.op, OPS[row.workload])
                for _ in range(rounds):
                    for row in rows:
                        row.stats.add(await time_op(row.op, OPS[row.workload]))
                for row in rows:
                    row.stats.calls = await _median_calls_async(row.op)
                    if row.short is not None:
                        row.stats.calls_short = await _median_calls_async(row.short)
        finally:
            os.chdir(home)
    return groups


async def _median_calls_async(op: Op) -> int:
    return int(statistics.median([await calls_of(op) for _ in range(3)]))


# -- the table ----------------------------------------------------------------------------

LABELS = {
    "turn": f"agent turn, per tool step (N={STEPS})",
    "bash": "bash tool call (true), sandbox off",
    "write": "fs write 1 KiB, no checkpoints",
    "edit": "fs edit 1 KiB, no checkpoints",
    "mount": "agent-core mount + dispose",
}


def _per_op(row: Stats, workload: str) -> tuple[float, float, float, float]:
    """CPU and wall µs per op (per step for a turn), calls per op (the per-step slope
    for a turn) and calls of the whole turn (0 otherwise)."""
    scale = 1 / (STEPS + 1) if workload == "turn" else 1.0
    cpu = statistics.median(row.cpu) * 1e6 * scale
    wall = statistics.median(row.wall) * 1e6 * scale
    if workload != "turn":
        return cpu, wall, row.calls, 0
    return cpu, wall, (row.calls - row.calls_short) / (STEPS - STEPS_SHORT), row.calls


def _line(name: str, row: Stats, ref: Stats, workload: str) -> str:
    cpu, wall, calls, turn = _per_op(row, workload)
    ref_cpu, ref_wall, ref_calls, ref_turn = _per_op(ref, workload)
    per_turn = f"{turn - ref_turn:>+9.0f}" if workload == "turn" else ""
    return (
        f"  {name:<46}{cpu:>9.1f}{ref_cpu:>9.1f}{cpu / ref_cpu:>8.3f}{wall / ref_wall:>8.3f}"
        f"{calls:>8.0f}{calls - ref_calls:>+9.1f}{per_turn}"
    )


def print_table(rev: str, cross: dict[str, dict[str, Stats]], local: Groups) -> None:
    print(
        f"\nThe new capabilities when unused  [CPU µs per op, medians; a turn: per tool step,"
        f"\ncalls its slope from {STEPS_SHORT} to {STEPS} steps, Δ turn: the whole turn's]"
    )
    print(
        f"  {'row':<46}{'CPU µs':>9}{'ref µs':>9}{'/ ref':>8}{'wall /':>8}"
        f"{'calls':>8}{'Δ calls':>9}{'Δ turn':>9}"
    )
    print(f"across revisions (ref: baseline {rev})")
    for workload, trees in cross.items():
        print(_line(LABELS[workload], trees["current"], trees["baseline"], workload))
    for title, group in local.items():
        plain = next(iter(group.values()))
        print(f"in-process, {title} (ref: the plain row)")
        for name, row in group.items():
            print(_line(name, row.stats, plain.stats, row.workload))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--baseline", default=BASELINE, help="the revision to compare with")
    args = parser.parse_args()
    rounds = 2 if args.quick else 31
    rev = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", f"{args.baseline}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    cross = across_revisions(rev, rounds)
    local = anyio.run(in_process, rounds)
    print_table(rev, cross, local)


if __name__ == "__main__":
    main()
