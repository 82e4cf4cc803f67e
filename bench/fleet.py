"""Fleet benchmark: what running tasks through the fleet costs beside the same agent
runs in a bare loop.

Run: ``.venv/bin/python -m bench.fleet`` (``--quick`` for a smoke run with 40 tasks,
``--no-ray`` to leave Ray out). No peers to install: the floor is dsh itself.

Every variant runs the same tasks (200; each one turn of a scripted model that streams
``done``, with a checkpoint before each chunk) at the same concurrency (8 sessions at
once), on a deployment of ``agent-core``, the model, ``session-jsonl`` (fsync on, as
deployed) and ``fleet`` (plus ``fleet-ray`` for Ray), each run on a fresh store:

* bare asyncio loop: one process, ``agents.create`` + one turn + ``dispose`` per task
  under a semaphore — the agent runs and their persistence, nothing else;
* local engine: ``fleet.run`` with the local engine — adds the reconcile (a snapshot of
  each task's session), a lease per attempt, the ``fleet/attempt`` record, the result
  read back from the session;
* ray, 2 workers: ``fleet.run`` with the ray engine on a local cluster (started once,
  before; its start and stop are reported on their own). The time includes starting
  the two workers (each a process loading the deployment) and stopping them; the row
  "after the first result" is the same runs from their first result to their last
  (scaled to all the tasks): the rate once the workers are up.

The in-process variants run with fsync on and again with it off (the fleet's own
bookkeeping without the disk), interleaved, 3 rounds each.

Reported: wall time of a run (median of the rounds), tasks per second, wall time per
task and the overhead per task against the bare loop, and this process's CPU time per
task (for Ray: the driver's only). On a loaded machine wall time swings with the other
processes' disk and CPU use (fsync most of all); CPU time much less. Memory: this
process's peak RSS after the in-process variants, and each Ray worker's peak RSS. Each
run is checked (untimed) for every task's answer.
"""

from __future__ import annotations

import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from dsh import Context, load_deployment
from dsh_fleet import EngineOptions, Fleet, TaskResult

from ._fleet_model import MODEL

TASKS = 200
CONCURRENCY = 8
MIB = 1 << 20
HERE = Path(__file__).parent
#: (wall seconds, this process's CPU seconds) of one run.
Timing = tuple[float, float]
#: Of each Ray run: the time from its first result to its last (workers up, warm).
after_first: list[float] = []
#: Each Ray run's workers: their pid and peak RSS.
ray_workers: list[list[dict[str, int]]] = []


def deployment(directory: Path, *, ray: bool = False, fsync: bool = True) -> Path:
    directory.mkdir(parents=True)
    shutil.copy(HERE / "_fleet_model.py", directory / "model.py")
    store = f"{{root: '{directory / 'sessions'}', fsync: {str(fsync).lower()}}}"
    lines = [
        "- {id: model, name: ./model.py}",
        f"- {{id: core, name: agent-core, config: {{model: {MODEL}}}}}",
        f"- {{id: store, name: session-jsonl, config: {store}}}",
        "- {id: fleet, name: fleet}",
    ]
    if ray:
        lines.append("- {id: ray, name: fleet-ray, config: {workers: 2}}")
    path = directory / "dsh.yml"
    path.write_text("\n".join(lines) + "\n")
    tasks = [json.dumps({"id": f"t{n}", "prompt": f"task {n}"}) + "\n" for n in range(TASKS)]
    (directory / "tasks.jsonl").write_text("".join(tasks))
    return path


def check(results: list[TaskResult], count: int) -> None:
    assert len(results) == count, len(results)
    assert all((r.output, r.stop_reason) == ("done", "completed") for r in results), results[:3]


async def bare(path: Path, count: int) -> Timing:
    """``count`` agent runs under a semaphore: create, one turn, dispose."""
    async with Context() as root:
        await load_deployment(path, root)
        limit = anyio.Semaphore(CONCURRENCY)
        ends: list[object] = []

        async def one(n: int) -> None:
            async with limit:
                agent = root.agents.create(f"bare-{n}", model=MODEL, cwd=str(path.parent))
                agent.send(f"task {n}")
                await agent.when_idle()
                ends.append(agent.session.turn_end(1))
                await agent.dispose()

        wall, cpu = time.perf_counter(), time.process_time()
        async with anyio.create_task_group() as tg:
            for n in range(count):
                tg.start_soon(one, n)
        timing = (time.perf_counter() - wall, time.process_time() - cpu)
    assert ends == [{"kind": "completed"}] * count, ends[:3]
    return timing


async def fleet_run(path: Path, count: int, engine_name: str) -> Timing:
    """``fleet.run`` of the first ``count`` tasks with the engine ``engine_name``."""
    async with Context() as root:
        await load_deployment(path, root)
        fleet: Fleet = root.fleet
        jobs = fleet.plan(fleet.read_tasks(path.parent / "tasks.jsonl")[:count], path)
        engine = fleet.engine(engine_name, EngineOptions(path, CONCURRENCY))
        arrivals: list[float] = []
        wall, cpu = time.perf_counter(), time.process_time()
        results = await fleet.run(
            jobs, engine, on_result=lambda _: arrivals.append(time.perf_counter())
        )
        timing = (time.perf_counter() - wall, time.process_time() - cpu)
        if engine_name == "ray":
            after_first.append(arrivals[-1] - arrivals[0])
            ray_workers.append(getattr(engine, "workers", []))
    check(results, count)
    return timing


def median(samples: list[Timing]) -> Timing:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def row(name: str, timing: Timing, count: int, floor: Timing | None) -> str:
    wall, cpu = timing
    over = "-" if floor is None else f"{(wall - floor[0]) / count * 1e3:.3f}"
    return (
        f"{name:<30}{wall:>8.3f}{count / wall:>9.1f}{wall / count * 1e3:>10.3f}"
        f"{over:>13}{cpu / count * 1e3:>10.3f}"
    )


def header(title: str) -> None:
    print(f"\n{title}")
    print(f"{'':<30}{'wall s':>8}{'tasks/s':>9}{'ms/task':>10}{'overhead ms':>13}{'CPU ms':>10}")


async def interleaved(
    base: Path, times: int, runs: dict[str, Callable[[Path], Awaitable[Timing]]], fsync: bool
) -> dict[str, Timing]:
    samples: dict[str, list[Timing]] = {name: [] for name in runs}
    for n in range(times):
        for name, run in runs.items():
            path = deployment(base / f"{name}-{fsync}-{n}", fsync=fsync)
            samples[name].append(await run(path))
    return {name: median(found) for name, found in samples.items()}


async def main() -> None:
    quick = "--quick" in sys.argv
    with_ray = "--no-ray" not in sys.argv
    count = 40 if quick else TASKS
    times = 1 if quick else 3
    base = Path(tempfile.mkdtemp(prefix="dsh-bench-fleet-"))
    runs: dict[str, Callable[[Path], Awaitable[Timing]]] = {
        "bare asyncio loop": lambda p: bare(p, count),
        "local engine": lambda p: fleet_run(p, count, "local"),
    }
    try:
        synced = await interleaved(base, times, runs, fsync=True)
        unsynced = await interleaved(base, times, runs, fsync=False)
        driver_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        header(f"fleet: {count} tasks, {CONCURRENCY} sessions at once, session-jsonl, fsync on")
        floor = synced["bare asyncio loop"]
        print(row("bare asyncio loop", floor, count, None))
        print(row("local engine", synced["local engine"], count, floor))
        started = stopped = 0.0
        if with_ray:
            from dsh_fleet_ray import connected

            start = time.perf_counter()
            with connected(None, host="127.0.0.1", cpus=2):
                started = time.perf_counter() - start
                ray_runs = [
                    await fleet_run(deployment(base / f"ray-{n}", ray=True), count, "ray")
                    for n in range(max(1, times - 1))
                ]
                stop = time.perf_counter()
            stopped = time.perf_counter() - stop
            ray = median(ray_runs)
            print(row("ray, 2 workers", ray, count, floor))
            steady = statistics.median(after_first) * count / (count - 1)
            print(row("ray, after the first result", (steady, ray[1]), count, floor))
        header("the same with fsync off (the bookkeeping without the disk)")
        print(row("bare asyncio loop", unsynced["bare asyncio loop"], count, None))
        print(row("local engine", unsynced["local engine"], count, unsynced["bare asyncio loop"]))
        print(f"\nmemory: this process's peak RSS {driver_rss / MIB:.0f} MiB (in-process runs)")
        if with_ray:
            sizes = ", ".join(f"{w['max_rss'] / MIB:.0f} MiB" for w in ray_workers[-1])
            print(f"memory: each ray worker's peak RSS {sizes}")
            print(f"ray local cluster: start {started:.2f} s, stop {stopped:.2f} s (in no row)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    anyio.run(main)
