"""Helpers of the acp front-end tests: a recording ACP client, an in-process rig on a
scripted model, and a ``dsh acp`` deployment for subprocess runs."""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
from acp import Client, RequestError, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from pydantic import BaseModel

from dsh import Context
from dsh.testing import Reply, ScriptedModel, write_deployment
from dsh_acp import AcpAgent, AcpFrontend
from dsh_agent_core import AgentCore
from dsh_tools import Tool, ToolCall
from tests.support import quoting_model_plugin

#: An answer to a permission request that cancels it (as a client does on cancel).
CANCEL = "cancel"
#: An answer that fails the permission request with a JSON-RPC error.
FAIL = "fail"


@dataclass
class Asked:
    """One ``session/request_permission`` the client received."""

    session_id: str
    tool_call: ToolCallUpdate
    options: list[PermissionOption]


class RecordingClient:
    """The editor side: records every session update (the command lists in
    ``commands``) and answers permission requests with the queued option ids
    (:data:`CANCEL` cancels; none left: reject)."""

    def __init__(self, *answers: str, fail_updates: bool = False) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.asked: list[Asked] = []
        #: Both in the order they came: each update's kind, ``"permission"`` for a
        #: permission request.
        self.timeline: list[str] = []
        #: The ``available_commands_update`` updates, apart: each session gets them
        #: besides what its turns show.
        self.commands: list[tuple[str, Any]] = []
        self.answers = deque(answers)
        self.fail_updates = fail_updates
        self._changed = anyio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if self.fail_updates:
            raise ConnectionError("the client is gone")
        if update.session_update == "available_commands_update":
            self.commands.append((session_id, update))
            self._notify()
            return
        self.updates.append((session_id, update))
        self.timeline.append(update.session_update)
        self._notify()

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.asked.append(Asked(session_id, tool_call, options))
        self.timeline.append("permission")
        self._notify()
        answer = self.answers.popleft() if self.answers else "reject_once"
        if answer == FAIL:
            raise RequestError.internal_error({"details": "the client broke"})
        if answer == CANCEL:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def wait_for(self, condition: Callable[[], object]) -> None:
        """Wait (without sleeping) until ``condition()`` holds after some update."""
        while not condition():
            await self._changed.wait()

    def kinds(self, session_id: str | None = None) -> list[str]:
        """The ``sessionUpdate`` kind of each update (of ``session_id``), in order."""
        return [u.session_update for s, u in self.updates if session_id is None or s == session_id]

    def of_kind(self, kind: str) -> list[Any]:
        return [u for _, u in self.updates if u.session_update == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        """The text of every chunk update of ``kind`` joined."""
        return "".join(u.content.text for u in self.of_kind(kind))

    def as_client(self) -> Client:
        """This client typed as ``acp.Client`` (a protocol of every client method; the
        connection answers the ones it lacks "method not found")."""
        return cast("Client", self)


class EchoArgs(BaseModel):
    text: str


async def echo(args: EchoArgs, call: ToolCall) -> str:
    return args.text


ECHO = Tool(name="echo", description="Echo.", parameters=EchoArgs, execute=echo)


@dataclass
class Rig:
    root: Context
    model: ScriptedModel
    client: RecordingClient
    agent: AcpAgent
    cwd: Path

    async def new(self) -> str:
        """A new ACP session in :attr:`cwd`; its id."""
        response = await self.agent.new_session(cwd=str(self.cwd))
        session_id: str = response.session_id
        return session_id

    async def say(self, session_id: str, text: str) -> str:
        """One prompt; its stop reason."""
        response = await self.agent.prompt(prompt=[text_block(text)], session_id=session_id)
        stop: str = response.stop_reason
        return stop

    def dsh_agent(self, session_id: str) -> Any:
        """The dsh agent serving ACP session ``session_id``."""
        return next(a for a in self.root.agents.list() if a.session.id == session_id)


@asynccontextmanager
async def acp_root(
    *replies: Reply,
    respond: Callable[[Any], Reply] | None = None,
    plugins: tuple[tuple[Any, Any], ...] = (),
    config: dict[str, Any] | None = None,
    core: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[Context, ScriptedModel]]:
    """A root with agent-core on a scripted model, the ``echo`` tool, each ``(plugin,
    config)`` of ``plugins`` and the acp front-end (not serving)."""
    async with Context() as root:
        model = ScriptedModel(*replies, respond=respond)
        settings = {"model": "scripted", "persona": "You are {{model}}-bot."} | (core or {})
        await root.plugin(AgentCore, settings)
        model.install(root)
        root.tools.register(ECHO)
        for plugin, plugin_config in plugins:
            await root.plugin(plugin, plugin_config)
        await root.plugin(AcpFrontend, config)
        yield root, model


@asynccontextmanager
async def acp_rig(
    cwd: Path,
    *replies: Reply,
    respond: Callable[[Any], Reply] | None = None,
    plugins: tuple[tuple[Any, Any], ...] = (),
    config: dict[str, Any] | None = None,
    core: dict[str, Any] | None = None,
    client: RecordingClient | None = None,
) -> AsyncIterator[Rig]:
    """:func:`acp_root` with the front-end's agent side open on a
    :class:`RecordingClient`; new sessions work in ``cwd``."""
    async with acp_root(*replies, respond=respond, plugins=plugins, config=config, core=core) as (
        root,
        model,
    ):
        recorder = client or RecordingClient()
        async with root.frontend.open_agent(recorder.as_client()) as agent:
            yield Rig(root, model, recorder, agent, cwd)


# -- subprocess runs ----------------------------------------------------------------------

#: The model of the subprocess deployment: it answers from the last user message.
#: "hello" → a thought and a two-part answer; "run <command>" → a bash call, then
#: the result quoted; "plan" → a todo list; "hang" → some text, then it waits forever.
PROCESS_MODEL = quoting_model_plugin(
    """
    said = last.text
    if said == "hello":
        return [
            BlockStart(0, "reasoning"), ReasoningDelta(0, "pondering"), BlockEnd(0),
            BlockStart(1, "text"), TextDelta(1, "Hel"), TextDelta(1, "lo!"), BlockEnd(1),
            Finish("stop"),
        ]
    if said.startswith("run "):
        return tool_calls(tool_call("bash", {"command": said[4:]}))
    if said == "plan":
        todos = [
            {"content": "look", "status": "in_progress"},
            {"content": "fix", "status": "pending"},
        ]
        return tool_calls(tool_call("todo_write", {"todos": todos}))
    if said == "hang":
        return [BlockStart(0, "text"), TextDelta(0, "working"), Wait(anyio.Event())]
    return text(f"you said: {said}")
    """,
    imports=(
        "import anyio\n"
        "from dsh.testing import Wait\n"
        "from dsh_llm import BlockEnd, BlockStart, Finish, ReasoningDelta, TextDelta\n"
    ),
)

#: A plugin that writes to stdout on load (which must reach stderr, not the
#: protocol) and leaves a marker file when it is disposed.
PROCESS_MARKER = """\
from pathlib import Path


def apply(ctx, config):
    print("NOISE on stdout")

    def disposed():
        Path(config["marker"]).write_text("disposed")

    return disposed
"""

PROCESS_DEPLOYMENT = """\
- {id: model, name: ./model.py}
- {id: core, name: agent-core, config: {model: scripted, persona: "You are a test agent."}}
- {id: sessions, name: session-jsonl, config: {root: ./sessions, fsync: false}}
- {id: bash, name: bash}
- {id: bash-local, name: bash-local}
- {id: tool-bash, name: tool-bash}
- {id: approval, name: approval, config: {policy: ask}}
- {id: todo, name: tool-todo}
- {id: marker, name: ./marker.py, config: {marker: ./disposed.txt}}
"""


def process_deployment(directory: Path) -> Path:
    """:data:`PROCESS_DEPLOYMENT` and its modules, written to ``directory``."""
    (directory / "model.py").write_text(PROCESS_MODEL)
    (directory / "marker.py").write_text(PROCESS_MARKER)
    return write_deployment(directory, PROCESS_DEPLOYMENT)


@dataclass
class Process:
    conn: ClientSideConnection
    client: RecordingClient
    process: Any  # asyncio.subprocess.Process


@asynccontextmanager
async def dsh_acp(
    directory: Path, client: RecordingClient | None = None, deployment: Path | None = None
) -> AsyncIterator[Process]:
    """``python -m dsh acp DEPLOYMENT`` (default: ``directory/dsh.yml``) run in
    ``directory``, connected to a recording client through the package's own client
    connection; stderr goes to ``directory/stderr.txt``. Leaving the block closes the
    process's stdin and waits for it to exit."""
    recorder = client or RecordingClient()
    with (directory / "stderr.txt").open("ab") as stderr:
        async with spawn_agent_process(
            recorder.as_client(),
            sys.executable,
            "-m",
            "dsh",
            "acp",
            str(deployment or directory / "dsh.yml"),
            # The whole environment (the package passes only a few variables by
            # default), so coverage measures the child too.
            env=dict(os.environ),
            cwd=directory,
            # The package terminates a child that takes longer than this to exit
            # after its stdin closed; a slow exit must fail on its exit status only.
            transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": 300.0},
        ) as (conn, process):
            yield Process(conn, recorder, process)
