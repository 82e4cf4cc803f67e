"""Helpers of the subagent tests (registry, in-process driver, spawn and fork): a
runtime with the registry on a scripted model, a stub provider, and a tool that
delegates from inside a parent's turn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from dsh import Context, Disposer
from dsh.testing import Reply, ScriptedModel, run_turn, tool_call, tool_calls
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_llm import LlmRequest
from dsh_session import Session
from dsh_subagent import (
    CAPABILITIES,
    SubagentOutcome,
    SubagentRequest,
    SubagentResult,
    SubagentRun,
    Subagents,
)
from dsh_subagent_fork import SubagentFork
from dsh_subagent_spawn import SubagentSpawn
from dsh_tools import Tool, ToolCall

#: The providers a runtime starts by default.
BOTH = (SubagentSpawn, SubagentFork)


@dataclass
class Rig:
    """A root with the agent spine, the registry, a scripted model and agent ``main``."""

    root: Context
    model: ScriptedModel
    parent: Agent

    @property
    def subagents(self) -> Subagents:
        service: Subagents = self.root.subagents
        return service

    async def start(
        self, provider: str = "spawn", prompt: str = "go", **request: Any
    ) -> SubagentRun:
        """Start a child of ``main`` with ``provider`` (``request`` adds fields)."""
        return await self.subagents.start(provider, SubagentRequest(prompt, self.parent, **request))

    def requests_of(self, session: Session) -> list[LlmRequest]:
        """The model requests made for ``session``, in order."""
        return [r for r in self.model.requests if r.session_id == session.id]


@asynccontextmanager
async def subagent_runtime(
    *replies: Reply,
    providers: Sequence[Any] = BOTH,
    core: Mapping[str, Any] | None = None,
    models: Sequence[str] = ("scripted",),
    respond: Any = None,
) -> AsyncIterator[Rig]:
    """Agent-core on the scripted model (``core`` adds to its config), the subagent
    registry and ``providers``; the model answers ``replies`` in order."""
    model = ScriptedModel(*replies, respond=respond, models=models)
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted", **(core or {})})
        model.install(root)
        await root.plugin(Subagents)
        for provider in providers:
            await root.plugin(provider)
        yield Rig(root, model, root.agents.get("main"))


# -- a provider that starts nothing ---------------------------------------------------------


@dataclass
class StubProvider:
    """A provider whose runs settle when the test says so (``runs[i].result.set``).

    ``returns`` replaces the run ``start`` hands back (to return a non-run); with
    ``awaitable`` ``start`` returns a coroutine instead of the run itself."""

    name: str = "stub"
    capabilities: frozenset[str] = CAPABILITIES
    inherits_parent_context: bool = False
    awaitable: bool = False
    returns: Any = None
    requests: list[SubagentRequest] = field(default_factory=list)
    runs: list[SubagentRun] = field(default_factory=list)

    def start(self, request: SubagentRequest) -> SubagentRun | Awaitable[SubagentRun]:
        self.requests.append(request)
        run = SubagentRun(f"{self.name}-{len(self.requests)}", None, SubagentOutcome())
        self.runs.append(run)
        made: Any = run if self.returns is None else self.returns
        if self.awaitable:
            return _later(made)
        return made  # type: ignore[no-any-return]  # a stub may return anything


async def _later(value: Any) -> Any:
    return value


# -- a tool that delegates -----------------------------------------------------------------------


class DelegateArgs(BaseModel):
    """What to delegate and to which provider."""

    provider: str
    prompt: str
    max_depth: int | None = None


@dataclass
class Delegations:
    """The runs the ``delegate`` tool started and the results it read, in order."""

    runs: list[SubagentRun] = field(default_factory=list)
    results: list[SubagentResult] = field(default_factory=list)


def delegate_tool(root: Context) -> tuple[Delegations, Disposer]:
    """Register the tool ``delegate``: it starts a child of the calling agent, waits for
    its result, disposes it and answers with the child's output. Returns what it did
    and the tool's disposer."""
    seen = Delegations()

    async def execute(args: DelegateArgs, call: ToolCall) -> str:
        subagents: Subagents = root.subagents
        request = SubagentRequest(args.prompt, call.agent, max_depth=args.max_depth)
        run = await subagents.start(args.provider, request)
        seen.runs.append(run)
        result = await run.result
        seen.results.append(result)
        await run.agent.dispose()
        return result.output

    tool = Tool(
        name="delegate",
        description="Delegate to a subagent.",
        parameters=DelegateArgs,
        execute=execute,
    )
    registered: Disposer = root.tools.register(tool)
    return seen, registered


def texts(request: LlmRequest) -> list[tuple[str, str]]:
    """The role and text of each message of ``request``."""
    return [(m.role, m.text) for m in request.messages]


# -- delegating from inside a turn -----------------------------------------------------------------


def second_turn_delegation(provider: str) -> list[Reply]:
    """The model's replies when the parent answers turn 1 (``first``), then in turn 2
    (``second``) calls ``delegate`` to ``provider`` with the prompt ``review``: the
    parent's answer, the tool call, the child's answer, the parent's last answer."""
    call = tool_call("delegate", {"provider": provider, "prompt": "review"})
    return ["turn one answer", tool_calls(call), "child answer", "parent done"]


async def delegate_in_second_turn(rig: Rig) -> SubagentRun:
    """Run the parent's two turns of :func:`second_turn_delegation` (with the
    ``delegate`` tool registered); returns the run the tool started."""
    seen, _ = delegate_tool(rig.root)
    assert await run_turn(rig.parent, "first") == {"kind": "completed"}
    assert await run_turn(rig.parent, "second") == {"kind": "completed"}
    [run] = seen.runs
    assert seen.results[0].output == "child answer"
    return run


def turn_end_index(session: Session, turn: int) -> int:
    """The position of turn ``turn``'s ``turn/end`` in ``session``'s log."""
    return next(
        n
        for n, event in enumerate(session.events)
        if event.type == "turn/end" and event.data["turn"] == turn
    )
