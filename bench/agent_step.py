"""Agent step benchmark: framework overhead per tool step, beside two peers and a floor.

Run: ``.venv/bin/python -m bench.agent_step`` (asyncio backend; needs the ``bench`` extra;
``--quick`` for a smoke run, ``--profile`` to also profile dsh at N=100).

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
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from agents import Agent as OaiAgent
from agents import ModelResponse as OaiModelResponse
from agents import ModelSettings, RunConfig, Runner, function_tool, set_tracing_disabled
from agents import Usage as OaiUsage
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ToolCallOutputItem, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model as OaiModel
from agents.models.interface import ModelTracing
from agents.result import RunResult
from agents.tool import Tool as OaiTool
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam
from pydantic import BaseModel, Field
from pydantic_ai import Agent as PaiAgent
from pydantic_ai import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai import ToolReturnPart as PaiToolReturnPart
from pydantic_ai.agent import AgentRunResult
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits
from typing_extensions import override

import dsh
from bench._timing import Row, print_table, sample_async
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    LlmRequest,
    Message,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from dsh_scope._scope import _LIVE
from dsh_session import Session, SessionEvent, SessionHeader
from dsh_tools import Tool, ToolCall

PROMPT = "Echo hello with the echo tool, then tell me you are done."
INSTRUCTIONS = "You are a benchmark agent. Use the echo tool when asked to echo."
ECHO_DESCRIPTION = "Return the given text unchanged."
ECHOED = "hello"
ECHO_ARGS = {"text": ECHOED}
ECHO_JSON = '{"text": "hello"}'
FINAL = "Done: every echo came back."
MODEL = "scripted"
SHORT = "short"
CHUNKS_PER_REPLY = 5

IMPLS = ("floor", "pydantic-ai", "openai-agents", "dsh")
FLOOR, PAI, OAI, DSH = IMPLS


class Script:
    """What every scripted model answers: ``tool_steps`` echo calls, then ``FINAL``."""

    __slots__ = ("calls", "tool_steps")

    def __init__(self) -> None:
        self.tool_steps = 0
        self.calls = 0

    def start(self, tool_steps: int) -> None:
        self.tool_steps = tool_steps
        self.calls = 0

    def next_call(self) -> str | None:
        """The id of the next echo call, or None when the model should answer."""
        self.calls += 1
        return f"call-{self.calls}" if self.calls <= self.tool_steps else None


SCRIPT = Script()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one run did, read back from the impl's own result."""

    tool_results: list[str]
    final: str
    chunks: int | None = None


# -- floor --------------------------------------------------------------------------------

FloorItem = tuple[str, object]


async def _floor_model(messages: list[FloorItem]) -> tuple[str, str, dict[str, str]] | str:
    call_id = SCRIPT.next_call()
    if call_id is None:
        return FINAL
    return call_id, "echo", ECHO_ARGS


async def _floor_echo(text: str) -> str:
    return text


FLOOR_TOOLS: dict[str, Callable[..., Awaitable[str]]] = {"echo": _floor_echo}


async def floor_run() -> list[FloorItem]:
    messages: list[FloorItem] = [("user", PROMPT)]
    while True:
        reply = await _floor_model(messages)
        messages.append(("assistant", reply))
        if isinstance(reply, str):
            return messages
        _, name, args = reply
        messages.append(("tool", await FLOOR_TOOLS[name](**args)))


def floor_outcome(result: object) -> Outcome:
    assert isinstance(result, list)
    results = [str(value) for role, value in result if role == "tool"]
    return Outcome(results, str(result[-1][1]))


# -- pydantic-ai --------------------------------------------------------------------------

PAI_USAGE = RequestUsage(input_tokens=1, output_tokens=1)


async def _pai_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    call_id = SCRIPT.next_call()
    if call_id is None:
        return ModelResponse(parts=[TextPart(FINAL)], usage=PAI_USAGE)
    return ModelResponse(
        parts=[ToolCallPart("echo", ECHO_JSON, tool_call_id=call_id)], usage=PAI_USAGE
    )


def make_pai() -> Callable[[], Awaitable[object]]:
    PaiAgent.instrument_all(False)
    agent: PaiAgent[None, str] = PaiAgent(FunctionModel(_pai_model), instructions=INSTRUCTIONS)
    agent.instrument = False

    async def echo(text: str) -> str:
        return text

    echo.__doc__ = ECHO_DESCRIPTION
    agent.tool_plain(echo)
    limits = UsageLimits(request_limit=None)

    async def run() -> AgentRunResult[str]:
        return await agent.run(PROMPT, usage_limits=limits)

    return run


def pai_outcome(result: object) -> Outcome:
    assert isinstance(result, AgentRunResult)
    results = [
        str(part.content)
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, PaiToolReturnPart)
    ]
    return Outcome(results, str(result.output))


# -- openai-agents ------------------------------------------------------------------------

OAI_USAGE = OaiUsage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)


class ScriptedOaiModel(OaiModel):
    """The smallest ``Model``: complete responses from the script, no streaming."""

    @override
    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[OaiTool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> OaiModelResponse:
        call_id = SCRIPT.next_call()
        item: ResponseFunctionToolCall | ResponseOutputMessage
        if call_id is None:
            text = ResponseOutputText(type="output_text", text=FINAL, annotations=[])
            item = ResponseOutputMessage(
                id="msg-final",
                type="message",
                role="assistant",
                status="completed",
                content=[text],
            )
        else:
            item = ResponseFunctionToolCall(
                type="function_call", call_id=call_id, name="echo", arguments=ECHO_JSON
            )
        return OaiModelResponse(output=[item], usage=OAI_USAGE, response_id=None)

    @override
    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[OaiTool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the benchmark only runs Runner.run")


def make_oai() -> Callable[[], Awaitable[object]]:
    set_tracing_disabled(True)

    async def echo(text: str) -> str:
        return text

    echo.__doc__ = ECHO_DESCRIPTION
    agent: OaiAgent[Any] = OaiAgent(
        name="bench",
        instructions=INSTRUCTIONS,
        model=ScriptedOaiModel(),
        tools=[function_tool(echo)],
    )
    config = RunConfig(tracing_disabled=True)

    async def run() -> RunResult:
        turns = SCRIPT.tool_steps + 2
        result: RunResult = await Runner.run(agent, PROMPT, max_turns=turns, run_config=config)
        return result

    return run


def oai_outcome(result: object) -> Outcome:
    assert isinstance(result, RunResult)
    results = [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    return Outcome(results, str(result.final_output))


# -- dsh ----------------------------------------------------------------------------------

DSH_USAGE = Usage(1, 1)


class ScriptedAdapter:
    """Streams each scripted reply as one block: start, one delta, end, usage, finish."""

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        call_id = SCRIPT.next_call()
        if call_id is None:
            yield BlockStart(0, "text")
            yield TextDelta(0, FINAL)
            yield BlockEnd(0)
            yield UsageChunk(DSH_USAGE)
            yield Finish("stop")
            return
        yield BlockStart(0, "tool-call")
        yield ToolCallDelta(0, call_id, ECHO_JSON, name="echo")
        yield BlockEnd(0)
        yield UsageChunk(DSH_USAGE)
        yield Finish("tool-calls")


class EchoArgs(BaseModel):
    text: str = Field(description="The text to send back.")


async def dsh_echo(args: EchoArgs, call: ToolCall) -> str:
    return args.text


async def make_dsh(root: dsh.Context) -> Callable[[], Awaitable[object]]:
    root.plugin(AgentCore, {"persona": INSTRUCTIONS})
    await root.settle()
    root.llm.register_adapter([MODEL], ScriptedAdapter())
    root.llm.register_adapter([SHORT], ShortAdapter())
    root.llm.register_adapter([STREAM], DeltasAdapter())
    root.tools.register(
        Tool(name="echo", description=ECHO_DESCRIPTION, parameters=EchoArgs, execute=dsh_echo)
    )
    await root.settle()

    async def run() -> Session:
        agent: Agent = root.agents.create(model=MODEL)
        agent.send(PROMPT)
        await agent.when_idle()
        await agent.dispose()
        return agent.session

    return run


def dsh_outcome(result: object) -> Outcome:
    assert isinstance(result, Session)
    events = result.events
    results = []
    for event in events:
        if event.type == "tool/result":
            assert not event.data["is_error"], event.data
            results.append(str(event.data["content"]))
    ends = [e.data["reason"] for e in events if e.type == "turn/end"]
    assert ends == [{"kind": "completed"}], ends
    final = [e.data["message"] for e in events if e.type == "assistant/message"][-1]
    chunks = sum(1 for e in events if e.type == "assistant/chunk")
    return Outcome(results, Message.from_json(final).text, chunks)


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
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Median and p95 seconds per run of each impl at each N (``sizes``: N -> batch)."""
    medians: dict[str, dict[str, float]] = {name: {} for name in runs}
    p95s: dict[str, dict[str, float]] = {name: {} for name in runs}
    for n, batch in sizes.items():
        fns = {name: batched(run, n, batch) for name, run in runs.items()}
        check = checker(n)
        for name, fn in fns.items():  # warm-up, checked too
            check(name, await fn())
        samples = await sample_async(fns, rounds, check)
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


class ShortAdapter:
    """Answers every request with one short text block (no tool call)."""

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        yield BlockStart(0, "text")
        yield TextDelta(0, "ok")
        yield BlockEnd(0)
        yield UsageChunk(DSH_USAGE)
        yield Finish("stop")


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


STREAM = "stream"
DELTAS = 1000
WORDS = [f"w{i % 997} " for i in range(DELTAS)]
ANSWER = "".join(WORDS)


class DeltasAdapter:
    """Streams :data:`ANSWER` in :data:`DELTAS` text deltas, or whole when asked."""

    def __init__(self) -> None:
        self.whole = False

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        yield BlockStart(0, "text")
        # Whole: a string made now, as a model's reply would be (not the constant).
        for piece in ["".join(WORDS)] if self.whole else WORDS:
            yield TextDelta(0, piece)
        yield BlockEnd(0)
        yield UsageChunk(DSH_USAGE)
        yield Finish("stop")


def _settled_bytes() -> int:
    gc.collect()
    return sum(stat.size for stat in tracemalloc.take_snapshot().statistics("filename"))


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


async def idle_agent_memory(root: dsh.Context, count: int) -> dict[str, float]:
    """Bytes per idle agent: dsh agents created and settled (driver waiting), beside
    a pydantic-ai and an openai-agents ``Agent`` with the same instructions and tool."""

    def pai() -> object:
        agent: PaiAgent[None, str] = PaiAgent(FunctionModel(_pai_model), instructions=INSTRUCTIONS)

        async def echo(text: str) -> str:
            return text

        agent.tool_plain(echo)
        return agent

    def oai() -> object:
        async def echo(text: str) -> str:
            return text

        return OaiAgent(
            name="bench",
            instructions=INSTRUCTIONS,
            model=ScriptedOaiModel(),
            tools=[function_tool(echo)],
        )

    made: list[Agent] = []
    tracemalloc.start()
    try:
        before = _settled_bytes()
        made.extend(root.agents.create(model=MODEL) for _ in range(count))
        for _ in range(3):  # settled: an idle agent starts no driver task
            await anyio.lowlevel.checkpoint()
        dsh_bytes = (_settled_bytes() - before) / count
    finally:
        tracemalloc.stop()
    assert all(agent.status == "idle" for agent in made)
    for agent in made:
        await agent.dispose()
    return {DSH: dsh_bytes, PAI: _bytes_per(pai, count), OAI: _bytes_per(oai, count)}


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


async def profile_dsh(run: Callable[[], Awaitable[object]], runs: int, top: int) -> None:
    """cProfile ``runs`` dsh runs at N=100 and print the top entries."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        SCRIPT.start(100)
        await run()
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    calls = stats.total_calls  # type: ignore[attr-defined]  # set by pstats, not in stubs
    steps = runs * 100
    print(
        f"\nprofile: dsh, {runs} runs x 100 tool steps; {calls / steps:.0f} Python calls "
        f"per step, {stats.total_tt / steps * 1e6:.0f} us per step under cProfile"  # type: ignore[attr-defined]
    )
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        stats.stream = out  # type: ignore[attr-defined]
        stats.sort_stats(key).print_stats(top)
        body = out.getvalue()
        print(f"\n-- top {top} by {key} --")
        print(body[body.index("   ncalls") :].rstrip())


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


async def main(quick: bool, profile: bool) -> None:
    rounds = 3 if quick else 25
    sizes = {1: 2, 10: 1, 100: 1} if quick else {1: 20, 10: 4, 100: 1}
    print(f"dsh agent-step benchmark ({versions()})")
    print(f"backend asyncio; {rounds} interleaved rounds; runs per sample {sizes} (N: runs)")
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
        medians, p95s = await measure_steps(runs, sizes, rounds)
        for values in medians.values():
            values["step 1-10"] = (values["N=10"] - values["N=1"]) / 9
            values["step 10-100"] = (values["N=100"] - values["N=10"]) / 90
        rows: list[Row] = [(name, medians[name]) for name in IMPLS]
        print_table(
            "one prompt -> N echo tool steps -> final text, per run; "
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
    anyio.run(main, "--quick" in sys.argv, "--profile" in sys.argv, backend="asyncio")
