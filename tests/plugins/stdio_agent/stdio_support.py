"""Helpers of the stdio-agent tests: the front-end on a scripted model with captured
streams and an input source the test feeds."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from dsh import Context
from dsh.testing import Reply, ScriptedModel, write_deployment
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_llm import BlockEnd, BlockStart, Chunk, Finish, ReasoningDelta, TextDelta
from dsh_stdio_agent import StdioAgent
from dsh_tools import Tool, ToolCall
from tests.support import quoting_model_plugin

#: The line REPL's ``/help`` with agent-core and the front-end: what they register.
LINE_HELP = """\
Type a message and press Enter to send it to the agent. Commands:
  /clear           start a new session (a stored one can be resumed later)
  /exit            quit (so does Ctrl-D)
  /help            this help
  /model [NAME]    show the model, or use NAME from the next turn on
  /prompt          the system prompt and the tools the agent would get now
  /sessions        the stored sessions (dsh run --resume ID continues one)
  /tokens          the tokens this session has used
Ctrl-C cancels the running turn; a second Ctrl-C in a row quits.
"""


def reasoning_reply() -> list[Chunk]:
    """A thought ("let me think"), then the answer "answer"."""
    return [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "let me "),
        ReasoningDelta(0, "think"),
        BlockEnd(0),
        BlockStart(1, "text"),
        TextDelta(1, "answer"),
        BlockEnd(1),
        Finish("stop"),
    ]


class EchoArgs(BaseModel):
    text: str


async def echo(args: EchoArgs, call: ToolCall) -> str:
    return args.text


class Lines:
    """The injected input source: lines fed by the test, ``""`` once closed."""

    def __init__(self, *lines: str) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[str](100)
        self.reads = 0
        self._read = anyio.Event()
        self.feed(*lines)

    def feed(self, *lines: str) -> None:
        for line in lines:
            self.send.send_nowait(line + "\n")

    def close(self) -> None:
        """End of input."""
        self.send.close()

    def dispose(self) -> None:
        self.send.close()
        self.receive.close()

    async def read_line(self) -> str:
        self.reads += 1
        self._read.set()
        self._read = anyio.Event()
        try:
            return await self.receive.receive()
        except anyio.EndOfStream:
            return ""

    async def until_reading(self, count: int) -> None:
        """Wait until the front-end has asked for its ``count``-th line."""
        while self.reads < count:
            await self._read.wait()


class Mirror(io.StringIO):
    """One stream's capture that also copies into a buffer shared with another."""

    def __init__(self, both: io.StringIO) -> None:
        super().__init__()
        self.both = both

    def write(self, text: str) -> int:
        self.both.write(text)
        return super().write(text)


@dataclass
class FrontRig:
    root: Context
    front: Any
    model: ScriptedModel
    lines: Lines
    out: io.StringIO
    err: io.StringIO
    both: io.StringIO

    @property
    def agent(self) -> Agent:
        agent: Agent = self.root.agents.list()[0]
        return agent


@asynccontextmanager
async def front_rig(
    *replies: Reply,
    config: dict[str, Any] | None = None,
    core: dict[str, Any] | None = None,
    interactive: bool = False,
    plugins: tuple[tuple[Any, Any], ...] = (),
) -> AsyncIterator[FrontRig]:
    """A root with agent-core on a scripted model, an echo tool, each ``(plugin,
    config)`` of ``plugins``, and the front-end, its streams captured (``both`` holds
    stdout and stderr interleaved)."""
    async with Context() as root:
        model = ScriptedModel(*replies)
        settings = {"model": "scripted", "persona": "You are {{model}}-bot."} | (core or {})
        await root.plugin(AgentCore, settings)
        model.install(root)
        root.tools.register(
            Tool(name="echo", description="Echo.", parameters=EchoArgs, execute=echo)
        )
        for plugin, settings in plugins:
            await root.plugin(plugin, settings)
        await root.plugin(StdioAgent, config)
        front = root.frontend
        both = io.StringIO()
        out, err = Mirror(both), Mirror(both)
        lines = Lines()
        front.stdout, front.stderr = out, err
        front.read_line = lines.read_line
        front.interactive = interactive
        try:
            yield FrontRig(root, front, model, lines, out, err, both)
        finally:
            lines.dispose()


#: A deployment with a scripted model that runs `printf ALLOWED` through bash and
#: answers with the result, asking the approval service (policy ask) first.
SHELL_DEPLOYMENT = """\
- {id: model, name: ./model.py}
- {id: core, name: agent-core, config: {model: scripted}}
- {id: bash, name: bash}
- {id: bash-local, name: bash-local}
- {id: tool-bash, name: tool-bash}
- {id: approval, name: approval, config: {policy: ask}}
"""

SHELL_MODEL = quoting_model_plugin(
    'return tool_calls(tool_call("bash", {"command": "printf ALLOWED"}))'
)


def shell_deployment(directory: Path) -> Path:
    """:data:`SHELL_DEPLOYMENT` and its ``model.py``, written to ``directory``."""
    (directory / "model.py").write_text(SHELL_MODEL)
    return write_deployment(directory, SHELL_DEPLOYMENT)
