"""Hooks benchmark: what one no-op command hook adds to a tool call.

Run: ``.venv/bin/python -m bench.hooks`` (asyncio backend; ``--quick`` for a smoke run,
``--trio`` for trio).

Each run is one turn of two steps on a scripted model (a fresh agent, created and
disposed within the run): an ``echo`` tool call, then a text answer. Three roots, built
once, interleaved round by round:

* none: agent-core alone (no ``hooks`` plugin);
* hook, no match: the ``hooks`` plugin with a ``PreToolUse`` hook for ``Read`` only: it
  listens to ``tool/before`` and ``tool/after`` but runs nothing for ``echo``;
* one hook: a ``PreToolUse`` hook on every tool whose command is ``true`` (a process
  start, ``bash -c true``, with the call's JSON on stdin, per call).

Beside them, the floor of that hook: ``anyio.run_process(["bash", "-c", "true"])``.
The report gives ms per turn (the median and the fastest run: the machines are shared
and noisy) and the difference to none. Every run is checked
(untimed) for the tool's result, so the workload cannot shrink.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel

from bench._timing import sample_async
from dsh import Context
from dsh.testing import ScriptedModel, run_turn, text, tool_call, tool_calls
from dsh_agent_core import AgentCore
from dsh_hooks import Hooks
from dsh_session import Session
from dsh_tools import Tool, ToolCall


class EchoArgs(BaseModel):
    text: str


async def echo(args: EchoArgs, call: ToolCall) -> str:
    return args.text


async def agent_with(root: Context, hooks: dict[str, Any] | None) -> Callable[[], Awaitable[Any]]:
    """One root's agent, ready: a coroutine fn that runs one echo turn."""
    await root.plugin(AgentCore, {"model": "m"})
    model = ScriptedModel(models=["m"])
    model.install(root)
    root.tools.register(Tool(name="echo", description="echo", parameters=EchoArgs, execute=echo))
    if hooks is not None:
        await root.plugin(Hooks, {"claude_settings": False, "hooks": hooks})

    async def turn() -> Any:
        # A fresh agent each run: a growing history would time the history, not the hook.
        agent = root.agents.create(model="m")
        model.reply(tool_calls(tool_call("echo", {"text": "hi"}, id="c1")), text("done"))
        await run_turn(agent, "go")
        await agent.dispose()
        return agent.session

    return turn


def result_of(session: Session) -> str:
    content: str = [e for e in session.events if e.type == "tool/result"][-1].data["content"]
    return content


async def main(quick: bool) -> None:
    noop = [{"matcher": "*", "hooks": [{"type": "command", "command": "true"}]}]
    async with Context() as none, Context() as unused, Context() as one:
        runs: dict[str, Callable[[], Awaitable[Any]]] = {
            "none": await agent_with(none, None),
            "hook, no match": await agent_with(
                unused, {"PreToolUse": [{**noop[0], "matcher": "Read"}]}
            ),
            "one hook": await agent_with(one, {"PreToolUse": noop}),
        }

        async def floor() -> Any:
            return await anyio.run_process(["bash", "-c", "true"])

        def check(name: str, result: object) -> None:
            if isinstance(result, Session):
                assert result_of(result) == "hi", name

        calls = {**runs, "floor: bash -c true": floor}
        await sample_async(calls, 3)  # warm up every path
        samples = await sample_async(calls, 10 if quick else 200, check)
    medians = {name: statistics.median(values) * 1e3 for name, values in samples.items()}
    fastest = {name: min(values) * 1e3 for name, values in samples.items()}
    print(f"\none tool call per turn, with and without hooks ({backend()} backend)")
    print(f"{'':<22} {'median':>12} {'vs none':>12} {'fastest':>12} {'vs none':>12}")
    for name in samples:
        row = f"{name:<22} {medians[name]:9.3f} ms"
        if name.startswith("floor"):
            print(f"{row} {'':>12} {fastest[name]:9.3f} ms")
            continue
        print(
            f"{row} {medians[name] - medians['none']:+9.3f} ms "
            f"{fastest[name]:9.3f} ms {fastest[name] - fastest['none']:+9.3f} ms"
        )


def backend() -> str:
    return "trio" if "--trio" in sys.argv else "asyncio"


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv, backend=backend())
