"""``dsh fleet run FILE TASKS.jsonl`` and ``dsh fleet status FILE TASKS.jsonl``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from dsh import Command, CommandError, Context, Fiber, run_deployment_command

from ._engine import EngineOptions, TaskResult
from ._service import STATES, Fleet

__all__ = ["Progress", "command", "describe_status", "results_stream", "tokens"]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="fleet_action", required=True, metavar="ACTION")
    run = actions.add_parser(
        "run",
        help="run every task's session (finished ones are skipped, unfinished resumed)",
        description="Run one session per task line ({id, prompt, cwd?, model?}): results "
        "go to stdout as JSON lines, progress to stderr. Run it again to finish what a "
        "crash left: finished sessions are skipped, unfinished ones resumed.",
    )
    run.add_argument("file", type=Path)
    run.add_argument("tasks", type=Path, metavar="TASKS.jsonl")
    run.add_argument(
        "--engine",
        default="local",
        help="where sessions run: local (this process, the default) or an engine a "
        "plugin adds (ray, with fleet-ray)",
    )
    run.add_argument("--address", metavar="ADDR", help="the cluster to join (--engine ray)")
    run.add_argument(
        "--concurrency",
        type=_positive,
        metavar="N",
        help="how many sessions run at once (default: the fleet's concurrency)",
    )
    status = actions.add_parser(
        "status",
        help="what the store says of each task: done, running, failed or pending",
        description="Read the store only (nothing is locked or written).",
    )
    status.add_argument("file", type=Path)
    status.add_argument("tasks", type=Path, metavar="TASKS.jsonl")


def tokens(usage: Mapping[str, int] | None) -> str:
    """``<in> in / <out> out`` of a usage, ``-`` for none."""
    if usage is None:
        return "-"
    return f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out"


class Progress:
    """The stderr lines of ``dsh fleet run``: one per finished task, then a summary."""

    def __init__(self, total: int, out: TextIO) -> None:
        self.total = total
        self.out = out
        self.count = 0
        self.skipped = 0
        self.kinds: Counter[str] = Counter()

    def _line(self, result: TaskResult, note: str) -> None:
        self.count += 1
        kind = result.stop_reason or "unfinished"
        self.kinds["done" if kind in ("completed", "max-tokens") else kind] += 1
        print(
            f"fleet: [{self.count}/{self.total}] {result.task}: {kind}{note}",
            file=self.out,
            flush=True,
        )

    def result(self, result: TaskResult) -> None:
        self._line(result, "" if result.error is None else f" ({result.error})")

    def skip(self, result: TaskResult) -> None:
        self.skipped += 1
        self._line(result, " (finished before: skipped)")

    def summary(self) -> str:
        parts = ", ".join(f"{n} {kind}" for kind, n in sorted(self.kinds.items()))
        return (
            f"fleet: {self.total} task{'s' if self.total != 1 else ''}: {parts or 'none'} "
            f"({self.skipped} skipped as finished)"
        )


def _fleet(root: Context, path: Path) -> Fleet:
    fleet = root.get("fleet")
    if not isinstance(fleet, Fleet):
        raise CommandError(f"{path}: the deployment has no fleet (add the fleet plugin)")
    return fleet


@contextlib.contextmanager
def results_stream() -> Iterator[TextIO]:
    """Where ``dsh fleet run`` writes its results: stdout, kept for them alone.

    When ``sys.stdout`` is the process's file descriptor 1, the results go to a
    duplicate of it (which children do not inherit) and, for the block, descriptor 1
    points at stderr: whatever else writes to stdout — a plugin's ``print``, a child
    process, Ray's driver reporting a dead worker, a C library — lands on stderr, and
    every line of stdout is a result. Otherwise (a test's capture) ``sys.stdout``
    itself.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a test's capture
        fd = -1
    if fd != 1:
        yield sys.stdout
        return
    sys.stdout.flush()
    results = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        yield results
    finally:
        try:
            results.flush()
        finally:
            sys.stdout.flush()
            os.dup2(results.fileno(), 1)
            results.close()


def _emit(result: TaskResult, out: TextIO) -> None:
    print(json.dumps(result.to_json(), ensure_ascii=False), file=out, flush=True)


def _run(args: argparse.Namespace) -> int:
    path: Path = args.file
    absolute = path.absolute()

    async def run(root: Context, deployment: Fiber) -> int:
        fleet = _fleet(root, path)
        jobs = fleet.plan(fleet.read_tasks(args.tasks), path)
        concurrency = args.concurrency or fleet.config.concurrency
        engine = fleet.engine(args.engine, EngineOptions(absolute, concurrency, args.address))
        progress = Progress(len(jobs), sys.stderr)

        def finished(result: TaskResult) -> None:
            _emit(result, results)
            progress.result(result)

        def skipped(result: TaskResult) -> None:
            _emit(result, results)
            progress.skip(result)

        done = await fleet.run(jobs, engine, on_result=finished, on_skip=skipped)
        print(progress.summary(), file=sys.stderr)
        ok = all(r.stop_reason in ("completed", "max-tokens") for r in done)
        return 0 if ok else 1

    with results_stream() as results:
        return run_deployment_command(path, run)


def describe_status(item: Any) -> str:
    """One line of ``dsh fleet status``: task, state, session, stop reason, tokens."""
    stop = f"  stop {item.stop_reason}" if item.stop_reason else ""
    return f"{item.task}  {item.state}  {item.session}{stop}  tokens {tokens(item.usage)}"


def _status(args: argparse.Namespace) -> int:
    path: Path = args.file

    async def status(root: Context, deployment: Fiber) -> int:
        fleet = _fleet(root, path)
        found = await fleet.status(fleet.plan(fleet.read_tasks(args.tasks), path))
        for item in found:
            print(describe_status(item))
        counts = Counter(item.state for item in found)
        totals = {"input_tokens": 0, "output_tokens": 0}
        for item in found:
            for key in totals:
                totals[key] += (item.usage or {}).get(key, 0)
        words = ", ".join(f"{counts[state]} {state}" for state in STATES)
        print(f"fleet: {len(found)} tasks: {words}; tokens {tokens(totals)}")
        return 0

    return run_deployment_command(path, status)


def _dispatch(args: argparse.Namespace) -> int:
    return _run(args) if args.fleet_action == "run" else _status(args)


#: ``dsh fleet``, published in the ``dsh.commands`` entry-point group.
command = Command(
    help="run many sessions, one per task (run, status)",
    configure=_configure,
    run=_dispatch,
)
