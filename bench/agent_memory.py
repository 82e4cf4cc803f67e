"""Memory of dsh agents beside the peers: what a turn keeps, what an idle agent holds.

Run alone: ``.venv/bin/python -m bench.agent_memory``; :mod:`bench.agent_step` prints
the same lines after its table.
"""

import gc
import tracemalloc
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
from agents import Agent as OaiAgent
from agents import RunConfig, Runner, function_tool, set_tracing_disabled
from pydantic_ai import Agent as PaiAgent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import UsageLimits

import dsh
from bench._step_dsh import ANSWER, DELTAS, STREAM, DeltasAdapter, make_dsh
from bench._step_peers import ScriptedOaiModel, _pai_model
from bench._step_script import DSH, INSTRUCTIONS, MODEL, OAI, PAI, PROMPT, SCRIPT
from dsh_agent import Agent


def _settled_bytes() -> int:
    """The traced bytes, less tracemalloc's own (the snapshots it keeps); filtered by
    hand: ``Snapshot.filter_traces`` fills caches (fnmatch's, abc's) the first time,
    which the measurement would count."""
    gc.collect()
    stats = tracemalloc.take_snapshot().statistics("filename")
    return sum(stat.size for stat in stats if stat.traceback[0].filename != tracemalloc.__file__)


async def _settle() -> None:
    """Let the tasks that just finished their work end (a driver task that set the
    agent idle is still unwinding its frames when ``when_idle()`` returns)."""
    for _ in range(3):
        await anyio.lowlevel.checkpoint()


async def turn_memory(root: dsh.Context, adapter: DeltasAdapter, whole: bool) -> int:
    """Bytes a session keeps for one turn whose answer streamed as :data:`DELTAS`
    deltas (or as one, with ``whole``): measured with tracemalloc around the turn."""
    adapter.whole = whole
    agent: Agent = root.agents.create(model=STREAM)
    agent.send(PROMPT)  # a first turn: what every turn allocates once is not counted
    await agent.when_idle()
    tracemalloc.start()
    try:
        before = _settled_bytes()
        agent.send(PROMPT)
        await agent.when_idle()
        await _settle()
        kept = _settled_bytes() - before
    finally:
        tracemalloc.stop()
    final = [m for m in agent.session.history() if m.role == "assistant"][-1]
    assert final.text == ANSWER, final.text[:40]
    await agent.dispose()
    return kept


def _bytes_per(make: Callable[[], object], count: int) -> float:
    """Bytes each of ``count`` objects made by ``make`` keeps (tracemalloc)."""
    made: list[object] = []
    tracemalloc.start()
    try:
        before = _settled_bytes()
        made.extend(make() for _ in range(count))
        kept = _settled_bytes() - before
    finally:
        tracemalloc.stop()
    assert len(made) == count
    return kept / count


def _pai_agent() -> PaiAgent[None, str]:
    """A pydantic-ai ``Agent`` with the script's instructions and the echo tool."""
    agent: PaiAgent[None, str] = PaiAgent(FunctionModel(_pai_model), instructions=INSTRUCTIONS)
    agent.instrument = False

    async def echo(text: str) -> str:
        return text

    agent.tool_plain(echo)
    return agent


def _oai_agent() -> OaiAgent[None]:
    """An openai-agents ``Agent`` with the script's instructions and the echo tool."""

    async def echo(text: str) -> str:
        return text

    return OaiAgent(
        name="bench",
        instructions=INSTRUCTIONS,
        model=ScriptedOaiModel(),
        tools=[function_tool(echo)],
    )


async def _kept_per(run: Callable[[], Awaitable[object]], count: int) -> float:
    """Bytes each of ``count`` one-turn runs keeps (tracemalloc), all kept until the
    end; one run first, so what the first run of an impl allocates once is not counted."""
    SCRIPT.start(1)
    await run()
    made: list[object] = []
    tracemalloc.start()
    try:
        before = _settled_bytes()
        for _ in range(count):
            SCRIPT.start(1)  # one echo tool step, then the final answer
            made.append(await run())
        await _settle()
        kept = _settled_bytes() - before
    finally:
        tracemalloc.stop()
    assert len(made) == count
    return kept / count


async def turn_agent_memory(root: dsh.Context, count: int) -> dict[str, float]:
    """Bytes per agent after one turn (one prompt, one echo tool step, the final
    answer): a dsh agent with its session, a pydantic-ai ``Agent`` with its
    ``AgentRunResult``, an openai-agents ``Agent`` with its ``RunResult``."""
    PaiAgent.instrument_all(False)
    set_tracing_disabled(True)
    limits = UsageLimits(request_limit=None)
    config = RunConfig(tracing_disabled=True)
    agents: list[Agent] = []

    async def dsh_turn() -> object:
        agent: Agent = root.agents.create(model=MODEL)
        agents.append(agent)
        agent.send(PROMPT)
        await agent.when_idle()
        return agent, agent.session

    async def pai_turn() -> object:
        agent = _pai_agent()
        return agent, await agent.run(PROMPT, usage_limits=limits)

    async def oai_turn() -> object:
        agent = _oai_agent()
        return agent, await Runner.run(agent, PROMPT, max_turns=3, run_config=config)

    kept = {
        DSH: await _kept_per(dsh_turn, count),
        PAI: await _kept_per(pai_turn, count),
        OAI: await _kept_per(oai_turn, count),
    }
    for agent in agents:
        await agent.dispose()
    return kept


async def idle_agent_memory(root: dsh.Context, count: int) -> dict[str, float]:
    """Bytes per idle agent: dsh agents created and settled (driver waiting), beside
    a pydantic-ai and an openai-agents ``Agent`` with the same instructions and tool."""

    made: list[Agent] = []
    tracemalloc.start()
    try:
        before = _settled_bytes()
        made.extend(root.agents.create(model=MODEL) for _ in range(count))
        await _settle()  # an idle agent starts no driver task
        dsh_bytes = (_settled_bytes() - before) / count
    finally:
        tracemalloc.stop()
    assert all(agent.status == "idle" for agent in made)
    for agent in made:
        await agent.dispose()
    return {DSH: dsh_bytes, PAI: _bytes_per(_pai_agent, count), OAI: _bytes_per(_oai_agent, count)}


async def memory_report(root: dsh.Context) -> None:
    """Print the memory lines; ``root`` runs agent-core with the :class:`DeltasAdapter`
    on :data:`STREAM` and :data:`MODEL` routed (as :func:`bench.agent_step.make_dsh`
    leaves it)."""
    adapter = root.llm._routes[STREAM]
    streamed = await turn_memory(root, adapter, whole=False)
    whole = await turn_memory(root, adapter, whole=True)
    text = len(ANSWER.encode())
    print(
        f"dsh memory kept by a turn streaming a {text / 1024:.1f} KiB answer: "
        f"{DELTAS} deltas {streamed / 1024:.1f} KiB ({streamed / text:.2f}x the text), "
        f"1 delta {whole / 1024:.1f} KiB; the deltas add {(streamed - whole) / 1024:.1f} "
        f"KiB ({(streamed - whole) / text:.2f}x the text)"
    )
    idle = await idle_agent_memory(root, 200)
    cells = ", ".join(f"{name} {idle[name] / 1024:.1f} KiB" for name in (DSH, PAI, OAI))
    print(
        f"memory per idle agent (200 of each): {cells}; dsh / pydantic-ai "
        f"{idle[DSH] / idle[PAI]:.2f}x, dsh / openai-agents {idle[DSH] / idle[OAI]:.2f}x"
    )
    after = await turn_agent_memory(root, 200)
    cells = ", ".join(f"{name} {after[name] / 1024:.1f} KiB" for name in (DSH, PAI, OAI))
    print(
        f"memory per agent after one turn (200 of each, agent and result kept): {cells}; "
        f"dsh / pydantic-ai {after[DSH] / after[PAI]:.2f}x, "
        f"dsh / openai-agents {after[DSH] / after[OAI]:.2f}x"
    )


async def main() -> None:
    async with dsh.Context() as root:
        await make_dsh(root)
        await memory_report(root)


if __name__ == "__main__":
    anyio.run(main, backend="asyncio")
