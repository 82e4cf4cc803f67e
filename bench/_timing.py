"""Timing helpers shared by the benchmarks: interleaved rounds, medians, ratios."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable

__all__ = ["Row", "measure", "measure_async", "print_table", "sample_async"]

Row = tuple[str, dict[str, float]]


def _per_op(samples: list[float], ops: int) -> float:
    return statistics.median(samples) / ops


def measure(
    fns: dict[str, Callable[[], object]],
    ops: int,
    rounds: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Median seconds per op of each fn (each call does ``ops`` ops), interleaved.

    ``clock``: ``time.thread_time`` counts this thread's CPU time only, which a loaded
    machine's preemption does not inflate."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = clock()
            fn()
            samples[name].append(clock() - start)
    return {name: _per_op(s, ops) for name, s in samples.items()}


async def sample_async(
    fns: dict[str, Callable[[], Awaitable[object]]],
    rounds: int,
    check: Callable[[str, object], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds per call of each coroutine fn, ``rounds`` samples each, interleaved.

    ``check(name, result)`` sees each call's result after the clock stops (untimed), so
    a benchmark can assert its workload without paying for the assertion.
    """
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = clock()
            result = await fn()
            samples[name].append(clock() - start)
            if check is not None:
                check(name, result)
    return samples


async def measure_async(
    fns: dict[str, Callable[[], Awaitable[object]]],
    ops: int,
    rounds: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Like :func:`measure` for coroutine functions, awaited in the running loop."""
    samples = await sample_async(fns, rounds, clock=clock)
    return {name: _per_op(s, ops) for name, s in samples.items()}


def print_table(title: str, columns: list[str], rows: list[Row], baseline: str, unit: str) -> None:
    """Print one table: a row per impl, a column per parameter, ``value (ratio)``."""
    scale = {"us": 1e6, "ms": 1e3}[unit]
    base = dict(rows)[baseline]
    width = max(len(name) for name, _ in rows)
    print(f"\n{title}  [{unit} per op; (x) = ratio to {baseline}]")
    print(" " * width + "".join(f"{c:>24}" for c in columns))
    for name, values in rows:
        cells = "".join(
            f"{values[c] * scale:>13.3f} ({_ratio(values[c] / base[c])}x)" for c in columns
        )
        print(f"{name:<{width}}{cells}")


def _ratio(ratio: float) -> str:
    return f"{ratio:>7.2f}" if ratio < 1000 else f"{ratio:>7.0f}"
