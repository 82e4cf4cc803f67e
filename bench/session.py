"""Session resume benchmark: loading a long session back, JSONL vs SQLite, beside a floor.

Run: ``.venv/bin/python -m bench.session`` (``--quick`` for a smoke run, ``--events N``,
``--rounds R``, ``--dir PATH`` to store somewhere else than the system temp directory).

One workload: the realistic agent log of ``bench.session_append`` (turns of two
tool-call steps and an answer step, 30 streamed chunks per step), whole turns up to
about 10,000 events, stored once by each backend's real plugin. Each round, interleaved:

* ``dsh session-jsonl`` / ``dsh session-sqlite``: ``await sessions.resume(id)`` in a
  short-lived plugin of a running root (the ``session/open`` answer in a worker thread:
  read, decode, check every record, under the session's lock; the ``Session`` built;
  the turn check of crash repair; the lock taken again to adopt it), then the plugin
  disposed (the session leaves the store, its lock let go);
* ``floor: json.loads per line``: read the JSONL file and ``json.loads`` each line; no
  checks, no events, no thread, no lock (the goal is dsh within 2x of it).

Reported: median ms per resume, µs per event and the ratio to the floor. Each resume is
checked (untimed) to hold every event.

A second table is the cost of appending on the event loop's thread (both stores commit
synchronously: ``append`` returns once the record is durable): the same workload
appended to a fresh session per round, with and without ``fsync``, in µs per commit
batch (a durable record and the chunks buffered before it).

A third table is the cost of one agent step after 10, 100 and 1,000 prior turns (the
goal: flat, because the history is derived incrementally, not rebuilt per step). The
session is seeded with that many turns of the workload above, then an agent of
``agent-core`` (persisted by ``session-jsonl``, ``fsync`` off) runs turns of two steps
(a tool call, then an answer) against an in-process model; a warm-up turn first, then
the median wall time per step. The second row adds ``compaction`` with a window too
large to trigger a summary, so it shows the cost of its own history index per request.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from bench.session_append import Record, workload
from dsh import Context
from dsh_agent_core import AgentCore
from dsh_compaction import Compaction
from dsh_llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    LlmRequest,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from dsh_session import DURABLE_EVENTS, Session, Sessions
from dsh_session_jsonl import FILE_NAME, JsonlSessions
from dsh_session_sqlite import SqliteSessions
from dsh_tools import Tool, ToolCall

SESSION = "bench"


def whole_turns(count: int) -> list[Record]:
    """The workload's whole turns, at least ``count`` events."""
    records = workload(count + 200)
    ends = [i for i, (kind, _) in enumerate(records) if kind == "turn/end" and i + 1 >= count]
    return records[: ends[0] + 1]


async def store(ctx: Context, records: list[Record]) -> None:
    """Write the workload as session ``SESSION`` through the backends of ``ctx``."""
    session = ctx.sessions.create(id=SESSION)
    for kind, data in records:
        session.append(kind, data)


def floor(path: Path) -> int:
    lines = path.read_bytes().splitlines()
    values = [json.loads(line) for line in lines[1:]]
    return len(values)


def resumer(ctx: Context) -> Callable[[], Awaitable[int]]:
    """A resume of ``SESSION`` in ``ctx`` (one backend loaded), in a plugin of its own."""

    async def resume_once() -> int:
        got: list[Session] = []

        async def plugin(pctx: Context, config: None) -> None:
            got.append(await pctx.sessions.resume(SESSION))

        fiber = await ctx.plugin(plugin)
        await fiber.dispose()
        return len(got[0].events)

    return resume_once


async def run(count: int, rounds: int, base: Path) -> None:
    records = whole_turns(count)
    configs: dict[str, tuple[Any, dict[str, Any]]] = {
        "dsh session-jsonl": (JsonlSessions, {"root": str(base / "jsonl"), "fsync": False}),
        "dsh session-sqlite": (SqliteSessions, {"path": str(base / "s.db"), "fsync": False}),
    }
    for plugin, config in configs.values():
        async with Context() as ctx:
            await ctx.plugin(Sessions)
            await ctx.plugin(plugin, config)
            await store(ctx, records)
    jsonl_file = base / "jsonl" / SESSION / FILE_NAME
    names = [*configs, "floor: json.loads per line"]
    samples: dict[str, list[float]] = {name: [] for name in names}
    async with Context() as jsonl_root, Context() as sqlite_root:
        for root, (plugin, config) in zip((jsonl_root, sqlite_root), configs.values(), strict=True):
            await root.plugin(Sessions)
            await root.plugin(plugin, config)
        resumes = dict(zip(configs, (resumer(jsonl_root), resumer(sqlite_root)), strict=True))
        for _ in range(rounds):
            for name, resume in resumes.items():
                start = time.perf_counter()
                events = await resume()
                samples[name].append(time.perf_counter() - start)
                assert events == len(records), (name, events)
            start = time.perf_counter()
            events = floor(jsonl_file)
            samples[names[-1]].append(time.perf_counter() - start)
            assert events == len(records)
    base_time = statistics.median(samples[names[-1]])
    print(f"\nsession resume: {len(records)} events, {rounds} rounds, median per resume, in {base}")
    width = max(map(len, names))
    print(f"{'':<{width}}  {'ms/resume':>10}  {'us/event':>9}  {'x floor':>8}")
    for name in names:
        median = statistics.median(samples[name])
        print(
            f"{name:<{width}}  {median * 1e3:>10.2f}  {median / len(records) * 1e6:>9.2f}  "
            f"{median / base_time:>7.2f}x"
        )
    jsonl, sqlite = (statistics.median(samples[name]) for name in configs)
    print(f"\nsqlite vs jsonl: {sqlite / jsonl:.2f}x (goal: each store within 2x of the floor)")
    await appends(records, max(3, rounds // 3), base)


async def appends(records: list[Record], rounds: int, base: Path) -> None:
    """The append table: µs per commit batch, per store and ``fsync`` setting."""
    batches = sum(kind in DURABLE_EVENTS for kind, _ in records)
    rows: list[tuple[str, float]] = []
    for fsync in (False, True):
        for name, plugin, config in [
            ("session-jsonl", JsonlSessions, {"root": str(base / f"a-jsonl-{fsync}")}),
            ("session-sqlite", SqliteSessions, {"path": str(base / f"a-{fsync}.db")}),
        ]:
            times: list[float] = []
            async with Context() as ctx:
                await ctx.plugin(Sessions)
                await ctx.plugin(plugin, {**config, "fsync": fsync})
                for _ in range(rounds):
                    session = ctx.sessions.create()
                    start = time.perf_counter()
                    for kind, data in records:
                        session.append(kind, data)
                    times.append(time.perf_counter() - start)
            rows.append((f"{name}, fsync {'on' if fsync else 'off'}", statistics.median(times)))
    print(f"\nappend on the loop's thread: {len(records)} records in {batches} commit batches")
    width = max(len(name) for name, _ in rows)
    print(f"{'':<{width}}  {'ms/session':>10}  {'us/batch':>9}")
    for name, median in rows:
        print(f"{name:<{width}}  {median * 1e3:>10.1f}  {median / batches * 1e6:>9.1f}")


# -- agent step cost against the length of the history -------------------------------------

STEP_MODEL = "bench"


class StepModel:
    """Step 1 of each turn calls ``echo``; step 2 answers. Usage on every reply."""

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        if request.step == 1:
            call = f"call-{request.turn}"
            yield BlockStart(0, "tool-call")
            yield ToolCallDelta(0, call, '{"text": "hello"}', name="echo")
            yield BlockEnd(0)
            finish = Finish("tool-calls")
        else:
            yield BlockStart(0, "text")
            for word in ("done", " with", " it"):
                yield TextDelta(0, word)
            yield BlockEnd(0)
            finish = Finish("stop")
        yield UsageChunk(Usage(1000, 10))
        yield finish


class EchoArgs(BaseModel):
    text: str = ""


async def echo(args: EchoArgs, call: ToolCall) -> str:
    return args.text


def prior_turns(turns: int) -> list[Record]:
    """The workload's first ``turns`` whole turns."""
    records = workload(120 * turns)
    ends = [i for i, (kind, _) in enumerate(records) if kind == "turn/end"]
    return records[: ends[turns - 1] + 1]


async def step_cost(turns: int, rounds: int, base: Path, compaction: bool) -> float:
    """Median seconds per step of an agent whose session holds ``turns`` prior turns."""
    async with Context() as root:
        await root.plugin(AgentCore, {})
        root.llm.register_adapter([STEP_MODEL], StepModel())
        root.tools.register(
            Tool(name="echo", description="echo", parameters=EchoArgs, execute=echo)
        )
        await root.plugin(
            JsonlSessions, {"root": str(base / f"steps-{compaction}"), "fsync": False}
        )
        if compaction:
            await root.plugin(Compaction, {"context_window": 10**9, "summary_max_tokens": 100})
        session = root.sessions.prepare(id=f"turns-{turns}")
        for kind, data in prior_turns(turns):
            session.append(kind, data)
        agent = root.agents.create(f"agent-{turns}", model=STEP_MODEL, session=session)
        agent.send("warm up")
        await agent.when_idle()
        samples: list[float] = []
        for _ in range(rounds):
            start = time.perf_counter()
            agent.send("go")
            await agent.when_idle()
            samples.append((time.perf_counter() - start) / 2)
        last = session.turn_end(session.last_turn())
        assert last == {"kind": "completed"}, last
        await agent.dispose()
        return statistics.median(samples)


async def steps(counts: list[int], rounds: int, base: Path) -> None:
    rows = {"agent-core + session-jsonl": False, "  + compaction (no summary)": True}
    print(f"\nagent step after N prior turns: median us/step, {rounds} turns of 2 steps each")
    print(f"{'':<28}" + "".join(f"{f'N={n:,}':>16}" for n in counts))
    for name, compaction in rows.items():
        costs = [await step_cost(n, rounds, base, compaction) for n in counts]
        cells = "".join(f"{c * 1e6:>9.0f} ({c / costs[0]:.2f}x)" for c in costs)
        print(f"{name:<28}{cells}")
    print("(goal: flat; the ratios are to N=" + f"{counts[0]:,})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 events, 3 rounds")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dir", type=Path, default=None, help="where to store")
    parser.add_argument(
        "--turns", default="10,100,1000", help="prior turns of the step table (comma-separated)"
    )
    parser.add_argument("--steps-only", action="store_true", help="only the step table")
    args = parser.parse_args(argv)
    count, rounds = (1_000, 3) if args.quick else (args.events, args.rounds)
    turns = [10, 100] if args.quick else [int(n) for n in args.turns.split(",")]
    base = Path(tempfile.mkdtemp(prefix="dsh-bench-", dir=args.dir))

    async def everything() -> None:
        if not args.steps_only:
            await run(count, rounds, base)
        await steps(turns, 5 if args.quick else max(rounds, 20), base)

    try:
        anyio.run(everything)
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
