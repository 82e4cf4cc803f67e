"""Loop events benchmark: what ``tool/before`` / ``tool/after`` cost a tool step (RFC 0036).

Run: ``.venv/bin/python -m bench.loop_events`` (asyncio; ``--quick`` for a smoke run).

First the per-call path alone (``_execute``: the events' checks, the dispatch, and
``tools.execute`` of ``echo``; the best of 7 rounds of 20,000 calls), the figure to read on a shared
machine; then a turn of 100 tool steps (the model calls ``echo``, then answers) on a
scripted model, µs per step, medians of rounds interleaved case by case. The cases:

* the loop with nobody listening (what every deployment without hooks or permission
  rules runs: two ``heard`` lookups a call);
* the same with the events' checks taken out (the call goes straight to
  ``tools.execute``, as before RFC 0036): the difference to the first row is what
  "free when nobody listens" costs;
* one no-op ``tool/before`` listener on ``agent.ctx`` (a serial dispatch a call);
* one no-op ``tool/before`` and one no-op ``tool/after`` listener.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any, cast

import anyio

import dsh_agent_loop._tool_calls as calls_module
from bench._echo_turn import ECHO, STEPS, install_echo_turn
from dsh import Context
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent
from dsh_tools import ToolCall, ToolResult


async def _unhooked(agent: Any, tools: Any, call: ToolCall) -> ToolResult:
    """The call path without the events' checks (as before RFC 0036)."""
    result: ToolResult = await tools.execute(call.name, call.arguments, call)
    return result


def _before(call: ToolCall) -> None:
    return None


def _after(call: ToolCall, result: ToolResult) -> None:
    return None


#: Each case: the ``_execute`` the loop uses, and the listeners added to the agent.
CASES: dict[str, tuple[str, tuple[tuple[str, Callable[..., None]], ...]]] = {
    "nobody listening": ("real", ()),
    "event checks taken out": ("unhooked", ()),
    "one no-op tool/before": ("real", (("tool/before", _before),)),
    "no-op tool/before + after": ("real", (("tool/before", _before), ("tool/after", _after))),
}


async def end_to_end(rounds: int) -> dict[str, float]:
    """Median microseconds per step of a turn of ``STEPS`` tool steps, per case."""
    module: Any = calls_module
    paths = {"real": module._execute, "unhooked": _unhooked}
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    async with Context() as root:
        await install_echo_turn(root)
        for _ in range(rounds):
            for name, (path, listeners) in CASES.items():
                module._execute = paths[path]
                agent = cast("LoopAgent", root.agents.create(model="m"))
                for event, listener in listeners:
                    agent.ctx.on(event, listener)
                start = time.perf_counter()
                agent.send("go")
                await agent.when_idle()
                samples[name].append((time.perf_counter() - start) / (STEPS + 1) * 1e6)
                reason = agent.session.turn_end(1)
                assert reason == {"kind": "completed"}, reason
                await agent.dispose()
        module._execute = paths["real"]
    return {name: statistics.median(values) for name, values in samples.items()}


async def isolated(number: int) -> dict[str, float]:
    """Microseconds per call of the loop's per-call path (``tools.execute`` of
    ``echo`` included): the best of 7 rounds of ``number`` calls, the cases
    interleaved round by round."""
    best = dict.fromkeys(CASES, float("inf"))
    async with Context() as root:
        await root.plugin(AgentCore, {})
        root.tools.register(ECHO)
        agents: dict[str, LoopAgent] = {}
        for name, (_, listeners) in CASES.items():
            agent = agents[name] = cast("LoopAgent", root.agents.create(model="m"))
            for event, listener in listeners:
                agent.ctx.on(event, listener)
        for _ in range(7):
            for name, (path, _) in CASES.items():
                execute = calls_module._execute if path == "real" else _unhooked
                agent = agents[name]
                tools = agent.ctx.tools
                start = time.perf_counter()
                for _ in range(number):
                    call = ToolCall("c", agent=agent, name="echo", arguments='{"text": "hi"}')
                    await execute(agent, tools, call)
                best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds / number * 1e6 for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    quick = parser.parse_args().quick
    calls = anyio.run(isolated, 200 if quick else 20_000)
    base = calls["nobody listening"]
    print("\nOne tool call through the loop's call path  [µs per call, best of 7]")
    for name, us in calls.items():
        print(f"  {name:<28}{us:>10.2f}  ({us - base:+.2f})")
    totals = anyio.run(end_to_end, 2 if quick else 31)
    base = totals["nobody listening"]
    print(f"\nA turn of {STEPS} tool steps, end to end  [µs per step, median]")
    for name, us in totals.items():
        print(f"  {name:<28}{us:>10.2f}  ({us - base:+.2f})")


if __name__ == "__main__":
    main()
