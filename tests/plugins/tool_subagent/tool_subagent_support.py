"""Helpers of the tool-subagent tests: a runtime with the subagent registry, both
providers and tool instances on one scripted model whose replies are routed by
delegation depth (the parent, its children, their children)."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from dsh import Context, Fiber
from dsh.testing import Reply, ScriptedModel
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_subagent import SubagentRequest, SubagentRun, Subagents
from dsh_subagent_fork import SubagentFork
from dsh_subagent_inprocess import DESCRIPTOR_EVENT, start_in_process
from dsh_subagent_spawn import SubagentSpawn
from dsh_tool_subagent import ToolSubagent
from dsh_tools import Tool, ToolCall, ToolResult

#: The wording the model sees (ARCHITECTURE §6.6), byte for byte.
SPAWN_SEES = (
    "Delegate a self-contained task to a separate agent with its own, empty context: it "
    "does not see this conversation, so give it everything it needs."
)
FORK_SEES = (
    "Delegate a task to a subagent that inherits this conversation: it starts with every "
    "completed turn so far (not the current, in-flight turn). Good for follow-ups, reviews "
    "and alternatives that need the context you already have."
)
BACKGROUND = (
    " By default this waits for the subagent and returns its final message; with "
    "run_in_background it returns an id at once, and a notice arrives in a later turn when "
    "the subagent finishes (send_message gives it more work, list_agents shows its status)."
)
FOREGROUND = " It waits for the subagent and returns its final message."
SPAWN_PROMPT = (
    "The complete, standalone task: the subagent does not see this conversation, so "
    "include every fact, path and constraint it needs, and what to return."
)
FORK_PROMPT = (
    "What the subagent should do now. It already has this conversation's completed turns: "
    "state only what is new (the task, what to focus on, what to return)."
)

SPAWN = {"provider": "spawn"}
FORK = {"provider": "fork", "tool_name": "subagent_fork"}


class EchoArgs(BaseModel):
    text: str


async def echo(args: EchoArgs, call: ToolCall) -> str:
    return args.text


ECHO = Tool(name="echo", description="Echo the text.", parameters=EchoArgs, execute=echo)


class Provider:
    """A provider with the capabilities a test chooses, running children in process
    (as ``inherits_parent_context`` says)."""

    def __init__(
        self,
        name: str = "spawn",
        *,
        inherits_parent_context: bool = False,
        capabilities: Iterable[str] = ("persona", "tool_filter", "depth_limit"),
    ) -> None:
        self.name = name
        self.inherits_parent_context = inherits_parent_context
        self.capabilities = frozenset(capabilities)

    async def start(self, request: SubagentRequest) -> SubagentRun:
        return await start_in_process(
            request, provider=self.name, inherit=self.inherits_parent_context
        )


@dataclass
class Rig:
    root: Context
    model: ScriptedModel
    tools: list[Fiber]
    runs: list[SubagentRun] = field(default_factory=list)
    #: Replies by delegation depth (0: the parent), consumed in order.
    script: dict[int, deque[Reply]] = field(default_factory=dict)

    @property
    def main(self) -> Agent:
        agent: Agent = self.root.agents.get("main")
        return agent

    def children(self) -> list[Agent]:
        """Every live agent but ``main``."""
        return [agent for agent in self.root.agents.list() if agent.id != "main"]

    def route(self, *by_depth: Sequence[Reply]) -> None:
        """Answer the agents at depth 0, 1, 2... with these replies, in order."""
        for depth, replies in enumerate(by_depth):
            self.script.setdefault(depth, deque()).extend(replies)

    def respond(self, request: Any) -> Reply:
        session = self.root.sessions.get(request.session_id)
        depth = 0 if session is None else session.header.meta.get("delegation_depth", 0)
        return self.script[depth].popleft()

    async def tool_names(self) -> list[str]:
        return [tool.name for tool in (await self.root.system_prompt.assemble()).tools]

    async def schema(self, name: str) -> Any:
        (tool,) = [t for t in (await self.root.system_prompt.assemble()).tools if t.name == name]
        return tool

    async def call(
        self, name: str, arguments: Mapping[str, Any], agent: Agent | None = None
    ) -> ToolResult:
        """Call tool ``name`` as ``agent`` (default: ``main``) outside any turn."""
        done: ToolResult = await self.root.tools.execute(
            name, dict(arguments), ToolCall("t", agent=self.main if agent is None else agent)
        )
        return done


@asynccontextmanager
async def subagent_rig(
    tools: Sequence[Mapping[str, Any]] = (SPAWN,),
    providers: Sequence[Any] = (SubagentSpawn, SubagentFork),
    models: Sequence[str] = ("scripted",),
) -> AsyncIterator[Rig]:
    """agent-core (agent ``main``) on a scripted model routed by depth, an ``echo``
    tool, the ``subagent`` registry, ``providers`` and one ``tool-subagent`` per
    config of ``tools``. Every run started is kept in
    :attr:`Rig.runs`."""
    async with Context() as root:
        model = ScriptedModel(models=models)
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        root.tools.register(ECHO)
        # What the providers declare, for the test's own providers.
        root.sessions.declare_event_types(DESCRIPTOR_EVENT)
        await root.plugin(Subagents)
        for provider in providers:
            await root.plugin(provider)
        fibers = [await root.plugin(ToolSubagent, dict(config)) for config in tools]
        rig = Rig(root, model, fibers)
        model.respond = rig.respond
        root.on("subagent/start", rig.runs.append)
        yield rig


def tool_results(agent: Agent) -> list[Mapping[str, Any]]:
    """The ``tool/result`` data of ``agent``'s session, in order."""
    return [event.data for event in agent.session.events if event.type == "tool/result"]


def user_texts(agent: Agent) -> list[str]:
    """The text of each ``user/message`` of ``agent``'s session, in order."""
    return [
        "".join(block.get("text", "") for block in event.data["message"]["content"])
        for event in agent.session.events
        if event.type == "user/message"
    ]
