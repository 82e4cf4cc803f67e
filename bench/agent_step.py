"""Agent step benchmark: framework overhead per tool step, beside two peers and a floor.

Run: ``.venv/bin/python -m bench.agent_step`` (asyncio backend; needs the ``bench`` extra;
``--quick`` for a smoke run, ``--profile`` to also profile dsh at N=100, ``--cpu`` to
time CPU (``time.process_time``, which a loaded machine inflates less) instead of wall
time; ``--run-profile``
for dsh alone: the Python calls and CPU time of a whole run at N=1, its fixed cost).

One run is one user prompt, then N tool steps (the model asks for the ``echo`` tool with a
small JSON argument and gets its result back), then a final text answer. N = 1, 10 and
100; the table shows µs per run and the cost of each extra tool step: the slope between
N=10 and N=100 (the headline, with a long history) and between N=1 and N=10. Every impl
follows the same :class:`Script`, and every run is checked (untimed) for N echo results
and the final text, so the workload cannot shrink.

* floor: await a fake model coroutine, look the tool up in a dict, await it, append to a
  list;
* pydantic-ai: one ``Agent`` with a ``FunctionModel`` (async, non-streaming: what
  ``agent.run`` uses) and an async ``tool_plain``; a fresh ``agent.run`` per run,
  instrumentation off, no request limit;
* openai-agents: one ``Agent`` with a minimal ``Model`` (``get_response`` only) and an
  async ``function_tool``; a fresh ``Runner.run`` per run, tracing off;
* dsh: one root with the ``agent-core`` bundle, a scripted adapter on ``root.llm`` and
  ``echo`` on ``root.tools``, built once; each run creates an agent with
  ``root.agents.create``, sends the prompt, waits for idle and disposes the agent (its
  scope, session and driver task), all timed. The adapter *streams* each reply as five
  chunks, which dsh logs to the session and assembles; the peers get complete replies.

Every scripted model reports the same token usage, so no peer spends time estimating it.

The script and constants are in :mod:`bench._step_script`, the peers and the floor in
:mod:`bench._step_peers`, dsh's impl in :mod:`bench._step_dsh`, the memory lines in
:mod:`bench.agent_memory`.

After the table, dsh alone (with the peers where there are any): agent create + dispose;
what 50 more runs leave behind; one ``session/event`` observer per agent through
``agent.ctx`` at M=10 and M=1000 agents (flat in M); resuming a session of 1000 stored
turns (making it, with its history derived, then its first turn, beside a turn on a
fresh session); the memory a turn keeps when its answer streams as 1000 deltas (beside
the same answer in one delta, and its text); the memory per idle agent beside an idle
pydantic-ai and openai-agents ``Agent`` (tracemalloc).
"""

from __future__ import annotations

import cProfile
import gc
import importlib.metadata
import io
import logging
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

import dsh
from bench._call_count import count_calls
from bench._step_dsh import dsh_outcome, make_dsh
from bench._step_peers import floor_outcome, floor_run, make_oai, make_pai, oai_outcome, pai_outcome
from bench._step_script import (
    CHUNKS_PER_REPLY,
    DSH,
    ECHOED,
    FINAL,
    FLOOR,
    IMPLS,
    MODEL,
    OAI,
    PAI,
    PROMPT,
    SCRIPT,
    SHORT,
    Outcome,
)
from bench._timing import Row, print_table, sample_async
from bench.agent_memory import memory_report
from dsh_agent import Agent
from dsh_llm import (
    Message,
    TextBlock,
)
from dsh_scope._scope import _LIVE
from dsh_session import Session, SessionEvent, SessionHeader

OUTCOMES: dict[str, Callable[[object], Outcome]] = {
    FLOOR: floor_outcome,
    PAI: pai_outcome,
    OAI: oai_outcome,
    DSH: dsh_outcome,
}


# -- measuring ----------------------------------------------------------------------------


def batched(run: Callable[[], Awaitable[object]], n: int, batch: int) -> Callable[[], Any]:
    """``batch`` scripted runs of N tool steps; returns their results for the check."""

    async def go() -> list[object]:
        results = []
        for _ in range(batch):
            SCRIPT.start(n)
            results.append(await run())
        return results

    return go


def checker(n: int) -> Callable[[str, object], None]:
    def check(name: str, results: object) -> None:
        assert isinstance(results, list)
        assert SCRIPT.calls == n + 1, (name, n, SCRIPT.calls)
        for result in results:
            outcome = OUTCOMES[name](result)
            assert outcome.tool_results == [ECHOED] * n, (name, n, outcome.tool_results)
            assert outcome.final == FINAL, (name, outcome.final)
            if outcome.chunks is not None:
                assert outcome.chunks == CHUNKS_PER_REPLY * (n + 1), (name, outcome.chunks)

    return check


async def measure_steps(
    runs: dict[str, Callable[[], Awaitable[object]]],
    sizes: dict[int, int],
    rounds: int,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Median and p95 seconds per run of each impl at each N (``sizes``: N -> batch),
    by ``clock``."""
    medians: dict[str, dict[str, float]] = {name: {} for name in runs}
    p95s: dict[str, dict[str, float]] = {name: {} for name in runs}
    for n, batch in sizes.items():
        fns = {name: batched(run, n, batch) for name, run in runs.items()}
        check = checker(n)
        for name, fn in fns.items():  # warm-up, checked too
            check(name, await fn())
        samples = await sample_async(fns, rounds, check, clock=clock)
        for name, values in samples.items():
            per_run = [v / batch for v in values]
            medians[name][f"N={n}"] = statistics.median(per_run)
            p95s[name][f"N={n}"] = statistics.quantiles(per_run, n=20)[-1]
    return medians, p95s


def _dsh_loggers() -> int:
    return sum(1 for name in logging.Logger.manager.loggerDict if name.startswith("dsh."))


async def dsh_residue(root: dsh.Context, run: Callable[[], Awaitable[object]]) -> str:
    """What 50 more dsh runs (N=10) leave behind once they are disposed."""
    gc.collect()
    objects, loggers = len(gc.get_objects()), _dsh_loggers()
    for _ in range(50):
        SCRIPT.start(10)
        await run()
    gc.collect()
    assert root.agents.list() == [], root.agents.list()
    assert root.sessions.list() == [], root.sessions.list()
    assert all(not live for live in _LIVE.values()), "a scope outlived its agent"
    objects = len(gc.get_objects()) - objects
    loggers = _dsh_loggers() - loggers
    return f"{objects:+d} gc-tracked objects, {loggers:+d} 'dsh.*' loggers"


def dsh_lifecycle(root: dsh.Context, batch: int) -> Callable[[], Awaitable[object]]:
    """``batch`` agents created and disposed without a turn: dsh's fixed cost per run."""

    async def go() -> None:
        for _ in range(batch):
            agent: Agent = root.agents.create(model=MODEL)
            await agent.dispose()

    return go


async def observed_turns(root: dsh.Context, agents: int, turns: int, rounds: int) -> float:
    """Median seconds per agent-turn with ``agents`` live agents, each observed by one
    ``session/event`` listener registered through its own ``agent.ctx``; ``turns``
    agents take one short turn per round."""
    made: list[Agent] = [root.agents.create(model=SHORT) for _ in range(agents)]
    heard = [0]

    def observe(session: Session, event: object) -> None:
        heard[0] += 1

    for agent in made:
        agent.ctx.on("session/event", observe)
    busy = made[:turns]

    async def go() -> None:
        for agent in busy:
            agent.send(PROMPT)
            await agent.when_idle()

    await go()  # warm-up
    samples = await sample_async({"turns": go}, rounds)
    # Each observer heard its own agent's events, and only those.
    expected = sum(len(agent.session.events) for agent in busy)
    assert heard[0] == expected, (heard[0], expected)
    for agent in made:
        await agent.dispose()
    return statistics.median(samples["turns"]) / len(busy)


def stored_history(turns: int) -> list[SessionEvent]:
    """The events of a finished session of ``turns`` one-step turns."""
    session = Session(SessionHeader("stored", 0.0))
    for turn in range(1, turns + 1):
        session.append("turn/start", {"turn": turn})
        question = Message.user(f"question {turn}").to_json()
        session.append("user/message", {"turn": turn, "step": 1, "message": question})
        session.append("step/start", {"turn": turn, "step": 1})
        answer = Message("assistant", (TextBlock(f"answer {turn}"),)).to_json()
        session.append("assistant/message", {"turn": turn, "step": 1, "message": answer})
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return list(session.events)


async def resumed_turns(root: dsh.Context, turns: int, rounds: int) -> dict[str, float]:
    """Median seconds: making a session of ``turns`` stored turns (what a backend's load
    hands the store; its history is derived then), the first turn of an agent on it,
    and a turn of an agent on a fresh session (the same run's peer)."""
    events = stored_history(turns)
    samples: dict[str, list[float]] = {"load": [], "first": [], "fresh": []}
    for n in range(rounds):
        start = time.perf_counter()
        session = Session(SessionHeader(f"stored-{n}", 0.0), list(events))
        samples["load"].append(time.perf_counter() - start)
        agent: Agent = root.agents.create(model=SHORT, session=session)
        start = time.perf_counter()
        agent.send(PROMPT)
        await agent.when_idle()
        samples["first"].append(time.perf_counter() - start)
        assert len(agent.session.history()) == 2 * turns + 2
        await agent.dispose()
        fresh: Agent = root.agents.create(model=SHORT)
        start = time.perf_counter()
        fresh.send(PROMPT)
        await fresh.when_idle()
        samples["fresh"].append(time.perf_counter() - start)
        await fresh.dispose()
    return {name: statistics.median(values) for name, values in samples.items()}


async def profile_dsh(
    run: Callable[[], Awaitable[object]], runs: int, top: int, n: int = 100
) -> None:
    """cProfile ``runs`` dsh runs of ``n`` tool steps and print the top entries: per
    step at N=100 (the step's cost), per run at N=1 (the run's fixed cost)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        SCRIPT.start(n)
        await run()
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    calls = stats.total_calls  # type: ignore[attr-defined]  # set by pstats, not in stubs
    per, unit = (runs * n, "step") if n > 1 else (runs, "run")
    print(
        f"\nprofile: dsh, {runs} runs x {n} tool steps; {calls / per:.0f} Python calls "
        f"per {unit}, {stats.total_tt / per * 1e6:.0f} us per {unit} under cProfile"  # type: ignore[attr-defined]
    )
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        stats.stream = out  # type: ignore[attr-defined]
        stats.sort_stats(key).print_stats(top)
        body = out.getvalue()
        print(f"\n-- top {top} by {key} --")
        print(body[body.index("   ncalls") :].rstrip())
    await print_counts(batched(run, n, runs), per, unit, top)


async def print_counts(
    runs: Callable[[], Awaitable[object]], per: int, unit: str, top: int
) -> None:
    """The same runs' calls counted by code object (each generated ``__init__`` apart)."""
    counts, builtin = await count_calls(runs)
    made = sum(v for k, v in counts.items() if k.endswith("(generated)"))
    print(
        f"\ncounted by code object: {counts.total() / per:.1f} Python calls per {unit} "
        f"({made / per:.1f} of them generated __init__s), {builtin / per:.1f} built-in calls"
    )
    print(f"-- top {top} by calls per {unit} --")
    for name, count in counts.most_common(top):
        print(f"  {count / per:7.2f}  {name}")


def versions() -> str:
    names = ["dsh-harness", "pydantic-ai-slim", "openai-agents", "openai", "pydantic", "anyio"]
    parts = [f"python {sys.version.split()[0]}"]
    parts += [f"{name} {importlib.metadata.version(name)}" for name in names]
    try:
        tree = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        tree = "unknown"
    return ", ".join(parts) + f"; dsh tree {tree}"


def ratio_line(label: str, mine: dict[str, float], theirs: dict[str, float]) -> str:
    cells = ", ".join(f"{c}: {mine[c] / theirs[c]:.3f}x" for c in mine)
    return f"  {label:<22} {cells}"


async def run_profile(quick: bool) -> None:
    """dsh alone at N=1: CPU time per whole run (create, one tool step, the final
    answer, dispose), then its Python calls."""
    rounds, batch = (3, 20) if quick else (25, 100)
    async with dsh.Context() as root:
        run = await make_dsh(root)
        go = batched(run, 1, batch)
        check = checker(1)
        check(DSH, await go())  # warm-up, checked
        gc.collect()
        gc.freeze()
        samples = await sample_async({DSH: go}, rounds, check, clock=time.thread_time)
        cpu = statistics.median(samples[DSH]) / batch
        print(f"dsh, one run at N=1: {cpu * 1e6:.1f} us CPU (median of {rounds} x {batch} runs)")
        await profile_dsh(run, batch, 40, n=1)


async def main(quick: bool, profile: bool, cpu: bool = False) -> None:
    rounds = 3 if quick else 25
    sizes = {1: 2, 10: 1, 100: 1} if quick else {1: 20, 10: 4, 100: 1}
    print(f"dsh agent-step benchmark ({versions()})")
    print(f"backend asyncio; {rounds} interleaved rounds; runs per sample {sizes} (N: runs)")
    clock = time.process_time if cpu else time.perf_counter
    async with dsh.Context() as root:
        runs = {
            FLOOR: floor_run,
            PAI: make_pai(),
            OAI: make_oai(),
            DSH: await make_dsh(root),
        }
        assert tuple(runs) == IMPLS
        # Imports and setup leave ~200k long-lived objects; freezing them keeps full
        # collections (whichever impl triggers them) from landing in random samples.
        gc.collect()
        gc.freeze()
        medians, p95s = await measure_steps(runs, sizes, rounds, clock)
        for values in medians.values():
            values["step 1-10"] = (values["N=10"] - values["N=1"]) / 9
            values["step 10-100"] = (values["N=100"] - values["N=10"]) / 90
        rows: list[Row] = [(name, medians[name]) for name in IMPLS]
        print_table(
            f"one prompt -> N echo tool steps -> final text, per run ({'CPU' if cpu else 'wall'}); "
            "'step a-b' = cost of one extra tool step between N=a and N=b",
            list(medians[FLOOR]),
            rows,
            FLOOR,
            "us",
        )
        print("\ndsh / peer (below 1 = dsh faster)")
        print(ratio_line("dsh / pydantic-ai", medians[DSH], medians[PAI]))
        print(ratio_line("dsh / openai-agents", medians[DSH], medians[OAI]))
        print("\np95 per run, us")
        for name in IMPLS:
            cells = ", ".join(f"{c}: {v * 1e6:,.1f}" for c, v in p95s[name].items())
            print(f"  {name:<14} {cells}")
        lifecycle = await sample_async({"lifecycle": dsh_lifecycle(root, 20)}, rounds)
        print(
            "\ndsh agent create + dispose without a turn (inside every dsh run above): "
            f"{statistics.median(lifecycle['lifecycle']) / 20 * 1e6:.1f} us"
        )
        residue = await dsh_residue(root, runs[DSH])
        print(f"dsh after 50 more runs (create, run, dispose): {residue}")
        few = await observed_turns(root, 10, 10, rounds)
        many = await observed_turns(root, 1000, 10, rounds)
        print(
            "dsh one session/event observer per agent (registered through agent.ctx), "
            f"per agent-turn: M=10 {few * 1e6:.1f} us, M=1000 {many * 1e6:.1f} us "
            f"({many / few:.2f}x; flat in M = 1x)"
        )
        resumed = await resumed_turns(root, 1000, rounds)
        print(
            "dsh resuming a session of 1000 stored turns: making it (history derived) "
            f"{resumed['load'] * 1e3:.2f} ms, its first turn {resumed['first'] * 1e3:.2f} ms; "
            f"a turn on a fresh session {resumed['fresh'] * 1e3:.2f} ms "
            f"(first / fresh {resumed['first'] / resumed['fresh']:.2f}x)"
        )
        await memory_report(root)
        print(
            "\nNot like for like: per step dsh does more than the peers. Its adapter streams"
            "\nfive chunks per reply, which dsh logs (one event each, packed per step) and"
            "\nassembles; a tool step records ten session events in all. Each step also"
            "\nassembles and renders the system prompt and offers the agent/pre-step,"
            "\nagent/request and llm/request waterfalls (skipped when nobody listens). The"
            "\npeers take whole replies and keep no event log. Each dsh run also creates and"
            "\ndisposes an agent: a scope fiber, a session, and the driver task its first"
            "\nmessage starts. The peers reuse one Agent."
        )
        if profile:
            await profile_dsh(runs[DSH], 3 if quick else 20, 30)


if __name__ == "__main__":
    if "--run-profile" in sys.argv:
        anyio.run(run_profile, "--quick" in sys.argv, backend="asyncio")
    else:
        flags = ("--quick" in sys.argv, "--profile" in sys.argv, "--cpu" in sys.argv)
        anyio.run(main, *flags, backend="asyncio")
