"""Subagent benchmark: what a subagent costs beside a bare agent on the same model.

Run: ``.venv/bin/python -m bench.subagent`` (asyncio backend; ``--quick`` for a smoke run,
``--trio`` for the trio backend, ``--profile`` to also profile the foreground spawn). No
peers to install: the floor is a bare dsh agent.

One root holds ``agent-core``, a scripted adapter (every call streams one text block,
"done", with a checkpoint before each chunk as a real model's I/O would have),
``subagent``, ``subagent-spawn`` and one ``tool-subagent`` on ``spawn``, built once. A
long-lived parent agent makes the calls. Workloads, each timed interleaved with its floor:

* per foreground spawn: the ``subagent`` tool through ``root.tools.execute`` as the parent
  (argument validation, the depth check, a child agent with its session and scope, the
  prompt, one scripted answer, the result, the child's disposal), and the same run straight
  through ``subagents.start`` + ``await run.result`` + ``dispose``; the floor is
  ``agents.create`` + one turn + ``dispose``. Goal: at most 1.5x. Beside the time, the
  peak of Python allocations during one run (``tracemalloc``, an untimed run).
* 100 concurrent children: 100 foreground tool calls of one parent in one task group,
  against 100 bare agents run at once: the time of a round, and the allocation peak of
  one untimed round. Goal: at most 1.5x.
* retained memory: 100 children started through ``subagents.start`` that have finished
  but are not disposed (a background child lives until its parent is disposed), per child,
  then what is left once they are disposed; the same through the tool with
  ``run_in_background`` (each child's notice is a turn of the parent, so that figure
  includes the parent's growth), then what is left once the parent is disposed. Goals: at
  most 100 KiB per finished child, nothing after disposal.

Times are medians of this process's CPU time (``time.process_time``), with wall time in
brackets: on a loaded machine wall time swings with the other processes, CPU time much
less. The Python calls per run (cProfile's count) do not move at all: the steadiest
measure of the work done. Memory: bytes move by a few hundred per child either way as
the event loop's and the runtime's tables resize, so "nothing after disposal" means no
gc-tracked object is left and under 1 KiB per child.

Each run is checked (untimed) for the child's answer, so the workload cannot shrink.
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import statistics
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import anyio

from dsh import Context
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_llm import BlockEnd, BlockStart, Chunk, Finish, LlmRequest, TextDelta, Usage, UsageChunk
from dsh_session import Session
from dsh_subagent import SubagentRequest, SubagentResult, SubagentRun, Subagents
from dsh_subagent_spawn import SubagentSpawn
from dsh_tool_subagent import ToolSubagent
from dsh_tools import ToolCall, ToolResult

from ._timing import sample_async

MODEL = "bench-model"
PERSONA = "You are a benchmark agent. Answer in one word."
PROMPT = "Say done."
FINAL = "done"
ARGS = {"description": "say done", "prompt": PROMPT}
CONCURRENT = 100
RETAINED = 100
KIB = 1024


class ScriptedAdapter:
    """Answers every call with one text block, a checkpoint before each chunk."""

    reply: tuple[Chunk, ...] = (
        BlockStart(0, "text"),
        TextDelta(0, FINAL),
        BlockEnd(0),
        UsageChunk(Usage(1, 1)),
        Finish("stop"),
    )

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        for chunk in self.reply:
            await anyio.lowlevel.checkpoint()
            yield chunk


class Bench:
    """The root, the parent and the operations under test."""

    def __init__(self, root: Context, parent: Agent) -> None:
        self.root = root
        self.parent = parent
        self.call = ToolCall("bench", agent=parent)
        self.runs: list[SubagentRun] = []
        root.on("subagent/start", self.runs.append)

    async def bare(self) -> object:
        agent: Agent = self.root.agents.create(model=MODEL)
        agent.send(PROMPT)
        await agent.when_idle()
        await agent.dispose()
        return agent.session

    async def tool(self) -> object:
        done: ToolResult = await self.root.tools.execute("subagent", ARGS, self.call)
        return done

    async def registry(self) -> object:
        run: SubagentRun = await self.root.subagents.start(
            "spawn", SubagentRequest(PROMPT, self.parent)
        )
        result: SubagentResult = await run.result
        await run.agent.dispose()
        return result

    def check(self, name: str, result: object) -> None:
        """Every run answered ``FINAL``, and left no agent behind."""
        for one in result if isinstance(result, list) else [result]:
            if isinstance(one, Session):
                ends = [e.data["reason"] for e in one.events if e.type == "turn/end"]
                assert ends == [{"kind": "completed"}], (name, ends)
            elif isinstance(one, ToolResult):
                assert (one.content, one.is_error) == (FINAL, False), (name, one)
            else:
                assert one == SubagentResult(FINAL, "completed"), (name, one)
        assert self.root.agents.list() == [self.parent], (name, self.root.agents.list())
        self.runs.clear()


async def build(root: Context) -> Bench:
    await root.plugin(AgentCore, {"persona": PERSONA})
    root.llm.register_adapter([MODEL], ScriptedAdapter())
    await root.plugin(Subagents)
    await root.plugin(SubagentSpawn)
    await root.plugin(ToolSubagent, {"provider": "spawn"})
    return Bench(root, root.agents.create("parent", model=MODEL))


def batched(op: Callable[[], Awaitable[object]], batch: int) -> Callable[[], Awaitable[object]]:
    async def go() -> list[object]:
        return [await op() for _ in range(batch)]

    return go


def together(op: Callable[[], Awaitable[object]], n: int) -> Callable[[], Awaitable[object]]:
    """``n`` runs of ``op`` at once, in one task group."""

    async def go() -> list[object]:
        results: list[object] = []

        async def one() -> None:
            results.append(await op())

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
        return results

    return go


async def peak(op: Callable[[], Awaitable[object]]) -> int:
    """The allocation peak of one run of ``op`` above what was allocated before it."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        await op()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


class Kept:
    """What ``n`` finished children hold, per child, and what is left once they are
    disposed: bytes per child and gc-tracked objects in all."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.base = 0
        self.objects = 0
        self.finished = 0.0
        self.left = 0.0
        self.left_objects = 0

    def start(self) -> None:
        self.base = traced()
        self.objects = len(gc.get_objects())

    def settled(self) -> None:
        self.finished = (traced() - self.base) / self.n

    def disposed(self) -> None:
        self.left = (traced() - self.base) / self.n
        self.left_objects = len(gc.get_objects()) - self.objects


async def retained_registry(bench: Bench, n: int) -> Kept:
    """``n`` children started through ``subagents.start``: finished, not disposed; then
    disposed."""

    async def finished() -> list[SubagentRun]:
        runs = [
            await bench.root.subagents.start("spawn", SubagentRequest(PROMPT, bench.parent))
            for _ in range(n)
        ]
        for run in runs:
            assert await run.result == SubagentResult(FINAL, "completed")
        return runs

    runs: list[SubagentRun] = []
    kept = Kept(n)
    kept.start()
    runs.extend(await finished())
    kept.settled()
    while runs:
        await runs.pop().agent.dispose()
    bench.runs.clear()
    kept.disposed()
    assert bench.root.agents.list() == [bench.parent]
    return kept


async def retained_background(bench: Bench, n: int) -> Kept:
    """``n`` background children of a new parent started through the tool, finished,
    every notice read by the parent (a turn each); then the parent disposed, and every
    child with it."""
    root = bench.root

    async def finished() -> Agent:
        parent: Agent = root.agents.create("background-parent", model=MODEL)
        call = ToolCall("bench", agent=parent)
        for _ in range(n):
            done = await root.tools.execute("subagent", ARGS | {"run_in_background": True}, call)
            assert done.content.startswith("started subagent "), done
        for run in bench.runs:
            await run.result
        await parent.when_idle()
        assert sum(e.type == "user/message" for e in parent.session.events) == n
        return parent

    parents: list[Agent] = []
    kept = Kept(n)
    kept.start()
    parents.append(await finished())
    kept.settled()
    await parents.pop().dispose()
    bench.runs.clear()
    kept.disposed()
    assert root.agents.list() == [bench.parent]
    return kept


async def retained_bare(bench: Bench, n: int) -> float:
    """Bytes per bare agent held after one turn, not disposed (for reference)."""
    base = traced()
    agents: list[Agent] = []
    for _ in range(n):
        agent: Agent = bench.root.agents.create(model=MODEL)
        agent.send(PROMPT)
        await agent.when_idle()
        agents.append(agent)
    finished = traced() - base
    for agent in agents:
        await agent.dispose()
    return finished / n


class Clocked:
    """Ops that also record this process's CPU time per call (wall time, which
    :func:`sample_async` takes, suffers on a loaded machine; CPU time much less)."""

    def __init__(self, ops: dict[str, Callable[[], Awaitable[object]]]) -> None:
        self.cpu: dict[str, list[float]] = {name: [] for name in ops}
        self.ops = {name: self._wrap(name, op) for name, op in ops.items()}

    def _wrap(
        self, name: str, op: Callable[[], Awaitable[object]]
    ) -> Callable[[], Awaitable[object]]:
        async def go() -> object:
            start = time.process_time()
            result = await op()
            self.cpu[name].append(time.process_time() - start)
            return result

        return go

    async def sample(self, rounds: int, check: Callable[[str, object], None]) -> Timings:
        for samples in self.cpu.values():
            samples.clear()
        wall = await sample_async(self.ops, rounds, check)
        return Timings(wall, {name: list(samples) for name, samples in self.cpu.items()})


@dataclass
class Timings:
    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]

    def ratio(self, name: str, per: int = 1) -> float:
        return self.median("cpu", name, per) / self.median("cpu", "bare", per)

    def median(self, clock: str, name: str, per: int = 1) -> float:
        samples = self.wall if clock == "wall" else self.cpu
        return statistics.median(samples[name]) / per

    def row(self, label: str, name: str, per: int = 1) -> float:
        """Print one line: CPU and wall time of ``name`` and of the bare agent."""
        cpu, floor = self.median("cpu", name, per), self.median("cpu", "bare", per)
        wall, wall_floor = self.median("wall", name, per), self.median("wall", "bare", per)
        print(
            f"{label:<36} {cpu * 1e3:9.3f} ms {floor * 1e3:9.3f} ms {cpu / floor:6.2f}x"
            f"   (wall {wall * 1e3:.3f} / {wall_floor * 1e3:.3f} ms, {wall / wall_floor:.2f}x)"
        )
        return cpu / floor


def line(label: str, value: float, floor: float, unit: str, scale: float) -> None:
    print(
        f"{label:<36} {value * scale:9.1f} {unit} {floor * scale:9.1f} {unit} {value / floor:6.2f}x"
    )


def python_calls(op: Callable[[], Awaitable[object]], runs: int) -> Callable[[], Awaitable[float]]:
    """The Python function calls per run of ``op`` (cProfile's count: a figure the
    machine's load does not move)."""

    async def count() -> float:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(runs):
            await op()
        profiler.disable()
        stats = pstats.Stats(profiler)
        total: int = stats.total_calls  # type: ignore[attr-defined]  # set by pstats, not in stubs
        return total / runs

    return count


async def profile(bench: Bench, runs: int, top: int) -> None:
    """cProfile ``runs`` foreground spawns through the tool and print the top entries."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        await bench.tool()
    profiler.disable()
    bench.runs.clear()
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats(key).print_stats(top)
        print(f"\n-- profile: {runs} foreground spawns, top {top} by {key} --")
        print(out.getvalue().split("\n\n", 2)[-1].rstrip())


async def main(quick: bool) -> None:
    batch, rounds, wide, counted = (5, 10, 3, 50) if quick else (10, 100, 15, 300)
    async with Context() as root:
        bench = await build(root)
        single = Clocked(
            {
                "tool": batched(bench.tool, batch),
                "registry": batched(bench.registry, batch),
                "bare": batched(bench.bare, batch),
            }
        )
        await single.sample(3, bench.check)  # warm up every path
        per_run = await single.sample(rounds, bench.check)
        calls = {
            name: await python_calls(op, counted)()
            for name, op in (("tool", bench.tool), ("bare", bench.bare))
        }
        bench.runs.clear()
        memory = {name: await peak(op) for name, op in (("tool", bench.tool), ("bare", bench.bare))}
        bench.runs.clear()
        crowd = Clocked(
            {"tool": together(bench.tool, CONCURRENT), "bare": together(bench.bare, CONCURRENT)}
        )
        await crowd.sample(1, bench.check)
        at_once = await crowd.sample(wide, bench.check)
        crowd_memory = {name: await peak(op) for name, op in crowd.ops.items()}
        crowd_calls = {
            name: await python_calls(together(op, CONCURRENT), 3)() / CONCURRENT
            for name, op in (("tool", bench.tool), ("bare", bench.bare))
        }
        bench.runs.clear()
        # A first round of each grows the runtime's and the event loop's tables to
        # hold that many children at once; the second round measures. Traced from the
        # first round on, so that a table reallocated in the second counts only its
        # growth.
        tracemalloc.start()
        await retained_registry(bench, RETAINED)
        kept = await retained_registry(bench, RETAINED)
        await retained_background(bench, RETAINED)
        kept_bg = await retained_background(bench, RETAINED)
        kept_bare = await retained_bare(bench, RETAINED)
        tracemalloc.stop()

    print(
        f"\nsubagent vs a bare agent ({anyio_backend()} backend, medians of CPU time; "
        "wall time in brackets)"
    )
    print(f"{'':<36} {'subagent':>12} {'bare agent':>12} {'ratio':>7}")
    first = per_run.row("foreground spawn (tool call)", "tool", batch)
    per_run.row("  straight through subagents.start", "registry", batch)
    line("  Python calls per run", calls["tool"], calls["bare"], "  ", 1)
    line("  peak memory of one run", memory["tool"], memory["bare"], "KiB", 1 / KIB)
    crowd_ratio = at_once.row(f"{CONCURRENT} concurrent children", "tool")
    line("  Python calls per child", crowd_calls["tool"], crowd_calls["bare"], "  ", 1)
    line(
        f"  peak memory, {CONCURRENT} at once",
        crowd_memory["tool"],
        crowd_memory["bare"],
        "KiB",
        1 / KIB,
    )
    print(
        f"{'retained per finished child':<36} {kept.finished / KIB:9.1f} KiB "
        f"{kept_bare / KIB:9.1f} KiB (a bare agent after one turn)"
    )
    print(
        f"{'  after disposal':<36} {kept.left:+9.0f} bytes per child, "
        f"{kept.left_objects:+d} gc-tracked objects"
    )
    print(
        f"{'  background, through the tool':<36} {kept_bg.finished / KIB:9.1f} KiB "
        "(with the parent's turn reading the notice)"
    )
    print(
        f"{'  after the parent is disposed':<36} {kept_bg.left:+9.0f} bytes per child, "
        f"{kept_bg.left_objects:+d} gc-tracked objects"
    )
    # Bytes move by a few hundred per child either way as the event loop's and the
    # runtime's tables resize; a leak shows as gc-tracked objects.
    clean = all(k.left_objects <= 0 and abs(k.left) < KIB for k in (kept, kept_bg))
    print(
        f"goals: spawn <= 1.5x ({'met' if first <= 1.5 else 'MISSED'}), "
        f"{CONCURRENT} concurrent <= 1.5x ({'met' if crowd_ratio <= 1.5 else 'MISSED'}), "
        f"<= 100 KiB per finished child ({'met' if kept.finished <= 100 * KIB else 'MISSED'}), "
        f"nothing after disposal ({'met' if clean else 'MISSED'})"
    )


async def run_profile(quick: bool) -> None:
    async with Context() as root:
        bench = await build(root)
        for _ in range(20):
            await bench.tool()
        await profile(bench, 200 if quick else 2000, 25)


def anyio_backend() -> str:
    return "trio" if "--trio" in sys.argv else "asyncio"


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv, backend=anyio_backend())
    if "--profile" in sys.argv:
        anyio.run(run_profile, "--quick" in sys.argv, backend=anyio_backend())
