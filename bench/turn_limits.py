"""Turn limits benchmark: what ``max_steps`` / ``max_turn_tokens`` add to each step.

Run: ``.venv/bin/python -m bench.turn_limits`` (asyncio; ``--quick`` for a smoke run).

Per step the loop adds one :func:`check_turn_limits` call (a step count and, with a
token limit, a token count compared with the agent's limits) and one
:func:`turn_tokens` sum of the step's usage. Measured:

* in isolation (``timeit``, the goal: ≤ 2 µs a step): the check without a token limit
  (the default), with one, and the sum, beside an empty function call as the floor;
* end to end: a turn of 100 tool steps on a scripted model that reports usage, the
  real check beside the loop with the check replaced by a no-op, interleaved round by
  round; the difference per step is within the noise of a shared machine, which is
  why the isolated figure is the one to read;
* for a server that reports no usage, the local estimate the loop makes instead
  (:func:`estimate_usage`: the request as JSON, bytes / 4) for a history of 10 and 100
  messages: a cost only such servers pay, growing with the history.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
from collections.abc import Callable
from typing import Any, cast

import anyio

import dsh_agent_loop._agent as agent_module
from bench._echo_turn import STEPS, USAGE, install_echo_turn
from dsh import Context
from dsh_agent_loop import LoopAgent
from dsh_agent_loop._limits import check_turn_limits, turn_tokens
from dsh_agent_loop._usage import estimate_usage
from dsh_llm import LlmRequest, Message, TextBlock, ToolCallBlock, ToolResultBlock, Usage
from dsh_system_prompt import ToolSchema


def _nothing(agent: object, steps: int, used: int) -> None:
    return None


def isolated(number: int) -> dict[str, float]:
    """Nanoseconds per call of each piece, the best of 5 repeats of ``number`` calls."""
    unlimited = LoopAgent.__new__(LoopAgent)
    unlimited.max_steps, unlimited.max_turn_tokens = 50, None
    limited = LoopAgent.__new__(LoopAgent)
    limited.max_steps, limited.max_turn_tokens = 50, 1_000_000
    usage = Usage(*USAGE)
    cases: dict[str, Callable[[], object]] = {
        "floor: an empty call": lambda: _nothing(unlimited, 7, 1000),
        "check, no token limit": lambda: check_turn_limits(unlimited, 7, 1000),
        "check, token limit": lambda: check_turn_limits(limited, 7, 1000),
        "turn_tokens(usage)": lambda: turn_tokens(usage),
    }
    return {
        name: min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e9
        for name, fn in cases.items()
    }


async def end_to_end(rounds: int) -> dict[str, float]:
    """Median microseconds per step of a turn of ``STEPS`` tool steps, with the real
    check and with a no-op in its place, interleaved."""
    module: Any = agent_module  # the loop's module, whose check is swapped per run
    real = module.check_turn_limits
    checks = {"with the checks": real, "checks replaced by a no-op": _nothing}
    samples: dict[str, list[float]] = {name: [] for name in checks}
    async with Context() as root:
        await install_echo_turn(root)
        for _ in range(rounds):
            for name, check in checks.items():
                module.check_turn_limits = check
                agent = cast("LoopAgent", root.agents.create(model="m"))
                start = time.perf_counter()
                agent.send("go")
                await agent.when_idle()
                samples[name].append((time.perf_counter() - start) / (STEPS + 1) * 1e6)
                reason = agent.session.turn_end(1)
                assert reason == {"kind": "completed"}, reason
                await agent.dispose()
        module.check_turn_limits = real
    return {name: statistics.median(values) for name, values in samples.items()}


def _history(messages: int) -> tuple[Message, ...]:
    history: list[Message] = [Message.user("Fix the failing test in tests/test_parser.py.")]
    while len(history) < messages:
        n = len(history)
        call = ToolCallBlock(f"call-{n}", "bash", '{"command": "pytest -x -q tests"}')
        history.append(Message("assistant", (TextBlock("Running the tests."), call)))
        history.append(Message("tool", (ToolResultBlock(f"call-{n}", "1 failed, 41 passed"),)))
    return tuple(history[:messages])


def estimates(number: int) -> dict[str, float]:
    """Microseconds per :func:`estimate_usage` of a request of 10 and 100 messages."""
    schema = ToolSchema("bash", "Run a shell command.", {"type": "object", "properties": {}})
    answer = Message("assistant", (TextBlock("The parser drops the last token."),))
    out: dict[str, float] = {}
    for size in (10, 100):
        request = LlmRequest(
            model="m", messages=_history(size), system="You are a coding agent.", tools=(schema,)
        )

        def estimate(request: LlmRequest = request) -> Usage:
            return estimate_usage(request, answer)

        seconds = min(timeit.repeat(estimate, number=number, repeat=5))
        out[f"estimate, {size} messages"] = seconds / number * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    quick = parser.parse_args().quick
    print("\nThe limit checks in isolation  [ns per call, best of 5]")
    for name, ns in isolated(10_000 if quick else 1_000_000).items():
        print(f"  {name:<26}{ns:>10.1f}")
    totals = anyio.run(end_to_end, 2 if quick else 15)
    added = totals["with the checks"] - totals["checks replaced by a no-op"]
    print(f"\nA turn of {STEPS} tool steps, end to end  [µs per step, median]")
    for name, us in totals.items():
        print(f"  {name:<26}{us:>10.2f}")
    print(f"  {'difference':<26}{added:>10.2f}  (noise: read the isolated figure)")
    print("\nThe local estimate of a step without reported usage  [µs per step, best of 5]")
    for name, us in estimates(100 if quick else 2_000).items():
        print(f"  {name:<26}{us:>10.1f}")


if __name__ == "__main__":
    main()
