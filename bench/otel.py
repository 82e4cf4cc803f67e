"""otel benchmark: what tracing costs a tool step (RFC 0042).

Run: ``.venv/bin/python -m bench.otel`` (asyncio; ``--quick`` for a smoke run).

A turn of 100 tool steps (the model calls ``echo``, then answers) on a scripted model,
µs of CPU time per step (``time.process_time``: the figure other processes on a
shared machine disturb least), medians of rounds interleaved case by case. Each step is one ``chat``
span and one ``execute_tool`` span (the turn adds one ``invoke_agent``). The cases:

* without the plugin;
* ``otel`` with ``enabled: false`` (tracing off): the goal is no difference to the
  first row;
* ``otel`` on, its spans going to the SDK's ``InMemorySpanExporter`` through a
  ``SimpleSpanProcessor`` (the host application's provider): the goal is at most
  1.15 times the first row;
* the same with ``capture_content: true`` (every request's history serialized).

Last, the floor no instrumentation can go under: the SDK alone creating and ending the
two spans of a step (a ``chat`` and an ``execute_tool`` under a turn, with their
attributes), µs per step, best of 7 rounds of 2,000 steps.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import AsyncExitStack
from typing import Any, cast

import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench._echo_turn import STEPS, install_echo_turn
from dsh import Context
from dsh_agent_loop import LoopAgent
from dsh_otel import Otel

#: Each case: the ``otel`` config, or None for a deployment without the plugin.
CASES: dict[str, dict[str, Any] | None] = {
    "without the plugin": None,
    "otel enabled: false": {"enabled": False},
    "otel on (in-memory)": {},
    "otel on + capture_content": {"capture_content": True},
}


async def _deployment(stack: AsyncExitStack, config: dict[str, Any] | None) -> Context:
    root = await stack.enter_async_context(Context())
    await install_echo_turn(root)
    if config is not None:
        await root.plugin(Otel, config)
    return root


async def end_to_end(rounds: int, exporter: InMemorySpanExporter) -> dict[str, float]:
    """Median microseconds per step of a turn of ``STEPS`` tool steps, per case."""
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    async with AsyncExitStack() as stack:
        roots = {name: await _deployment(stack, config) for name, config in CASES.items()}
        for _ in range(rounds):
            for name, root in roots.items():
                agent = cast("LoopAgent", root.agents.create(model="m"))
                start = time.process_time()
                agent.send("go")
                await agent.when_idle()
                samples[name].append((time.process_time() - start) / (STEPS + 1) * 1e6)
                reason = agent.session.turn_end(1)
                assert reason == {"kind": "completed"}, reason
                await agent.dispose()
                exporter.clear()
    return {name: statistics.median(values) for name, values in samples.items()}


def sdk_floor(provider: TracerProvider, exporter: InMemorySpanExporter, steps: int) -> float:
    """Microseconds the SDK takes for the two spans of a step (best of 7 rounds)."""
    tracer = provider.get_tracer("bench")
    turn = tracer.start_span("invoke_agent main")
    parent = trace.set_span_in_context(turn)
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo"}
    best = float("inf")
    for _ in range(7):
        start = time.process_time()
        for _ in range(steps):
            span = tracer.start_span("chat m", parent, kind=trace.SpanKind.CLIENT, attributes=chat)
            span.set_attribute("gen_ai.usage.input_tokens", 1200)
            span.end()
            tracer.start_span("execute_tool echo", parent, attributes=tool).end()
        best = min(best, time.process_time() - start)
        exporter.clear()
    turn.end()
    return best / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    quick = parser.parse_args().quick
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the host application's provider
    totals = anyio.run(end_to_end, 2 if quick else 31, exporter)
    base = totals["without the plugin"]
    print(f"\nA turn of {STEPS} tool steps, end to end  [CPU µs per step, median]")
    for name, us in totals.items():
        print(f"  {name:<28}{us:>10.2f}  (x{us / base:.3f})")
    floor = sdk_floor(provider, exporter, 20 if quick else 2_000)
    print(f"  {'the SDK alone, 2 spans':<28}{floor:>10.2f}  (x{(base + floor) / base:.3f} at best)")


if __name__ == "__main__":
    main()
