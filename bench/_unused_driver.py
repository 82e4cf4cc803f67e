"""The workloads of ``bench.unused``, in a form every revision since issue 24 can run.

Imported two ways: by ``bench.unused`` in its own process (the current tree's rows),
and as the top-level module ``_unused_driver`` of a worker interpreter whose
``sys.path`` starts with one tree (the current one or the baseline's worktree) — see
:func:`serve`. So it imports only what the baseline revision already had: the runtime,
agent-core, the scripted model of ``dsh.testing``, bash / bash-local / tool-bash and
fs / fs-local / tool-fs; and nothing of ``bench`` (the baseline's ``bench`` package
would be the one found). Each workload is an ``op``: a coroutine function that does
one unit of work (a turn, a tool call, a mount and dispose).
"""

from __future__ import annotations

import cProfile
import json
import pstats
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from pydantic import BaseModel

from dsh import Context
from dsh.testing import ScriptedModel, run_turn, text, tool_call, tool_calls
from dsh_agent_core import AgentCore
from dsh_bash import Bash
from dsh_bash_local import LocalBash
from dsh_fs import Filesystem
from dsh_fs_local import FsLocal
from dsh_system_prompt import SystemPrompt
from dsh_tool_bash import ToolBash
from dsh_tool_fs import FsTools
from dsh_tools import Tool, ToolCall, Tools

__all__ = [
    "ECHO",
    "STEPS",
    "STEPS_SHORT",
    "EchoTurn",
    "Op",
    "OpenRoot",
    "bash_op",
    "calls_of",
    "cross_revision_ops",
    "fs_ops",
    "loaded_from",
    "roots",
    "serve",
    "time_op",
]

#: Tool steps in the timed turn, and in the shorter turn the call slope is taken from.
STEPS = 20
STEPS_SHORT = 10

Op = Callable[[], Awaitable[object]]
#: Opens a root that stays open as long as the :func:`roots` it came from.
OpenRoot = Callable[[], Awaitable[Context]]


@asynccontextmanager
async def roots() -> AsyncIterator[OpenRoot]:
    """Open roots, each held by its own task of one task group, closed on the way out.

    Every root's tasks then sit under the same number of cancel scopes: roots entered
    one inside another (one ``AsyncExitStack``) would not, and each checkpoint of a
    later root's tasks would walk one scope more (anyio's ``checkpoint_if_cancelled``),
    which cProfile counts as calls of the row, not of what the row measures.
    """
    stop = anyio.Event()

    async def hold(*, task_status: anyio.abc.TaskStatus[Context]) -> None:
        async with Context() as root:
            task_status.started(root)
            await stop.wait()

    async with anyio.create_task_group() as tg:

        async def open_root() -> Context:
            root: Context = await tg.start(hold)
            return root

        try:
            yield open_root
        finally:
            stop.set()


class _Args(BaseModel):
    text: str = ""


async def _echo(args: _Args, call: ToolCall) -> str:
    return args.text


#: The in-memory tool of the turn: it answers its ``text``.
ECHO = Tool(name="echo", description="Answers its text.", parameters=_Args, execute=_echo)


class EchoTurn:
    """Turns of ``steps`` ``echo`` calls then an answer, on a scripted model serving
    ``m`` (installed on ``root``, which has agent-core). Each turn is a fresh agent,
    created and disposed within it, so no history grows from round to round."""

    def __init__(self, root: Context) -> None:
        self.root = root
        self.steps = STEPS
        self.model = ScriptedModel(respond=self._reply, models=["m"])
        self.model.install(root)
        root.tools.register(ECHO)

    def _reply(self, request: Any) -> Any:
        if request.step <= self.steps:
            return tool_calls(tool_call("echo", {"text": "hi"}))
        return text("done")

    def op(self, steps: int) -> Op:
        """The op of a turn of ``steps`` tool steps."""

        async def turn() -> object:
            self.steps = steps
            agent = self.root.agents.create(model="m")
            reason = await run_turn(agent, "go")
            await agent.dispose()
            self.model.requests.clear()
            assert reason == {"kind": "completed"}, reason
            return reason

        return turn


def bash_op(root: Context) -> Op:
    """A ``bash`` tool call of ``true`` (``root`` has bash, bash-local, tool-bash)."""
    call = ToolCall("bench")

    async def run() -> object:
        result = await root.tools.execute("bash", {"command": "true"}, call)
        assert not result.is_error, result.content
        return result

    return run


def fs_ops(root: Context, folder: Path) -> tuple[Op, Op]:
    """A ``write`` of a 1 KiB file with new content each call, and an ``edit`` of it
    (``root`` has fs, fs-local and tool-fs)."""
    path = str(folder / "file.txt")
    call = ToolCall("bench")
    count = [0]

    async def write() -> object:
        count[0] += 1
        body = f"{count[0]:08}\n" + "x" * 1015
        result = await root.tools.execute("write", {"file_path": path, "content": body}, call)
        assert not result.is_error, result.content
        return result

    async def edit() -> object:
        old = f"{count[0]:08}"
        count[0] += 1
        arguments = {"file_path": path, "old_string": old, "new_string": f"{count[0]:08}"}
        result = await root.tools.execute("edit", arguments, call)
        assert not result.is_error, result.content
        return result

    return write, edit


async def time_op(op: Op, ops: int) -> tuple[float, float]:
    """CPU and wall seconds per call of ``op`` over ``ops`` calls in a row."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(ops):
        await op()
    return (time.process_time() - cpu) / ops, (time.perf_counter() - wall) / ops


async def calls_of(op: Op) -> int:
    """Python calls (cProfile's count, C functions included) of one call of ``op``."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        await op()
    finally:
        profile.disable()
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


async def cross_revision_ops(open_root: OpenRoot, folder: Path) -> dict[str, Op]:
    """The workloads both revisions run, each on its own root: ``turn`` (``STEPS`` tool
    steps), ``turn-short`` (``STEPS_SHORT``), ``bash``, ``write``, ``edit`` and
    ``mount`` (agent-core mounted and disposed on a live root)."""
    turn_root = await open_root()
    await turn_root.plugin(AgentCore, {"max_steps": STEPS + 10})
    turn = EchoTurn(turn_root)
    bash_root = await open_root()
    bash_stack: tuple[type[Any], ...] = (SystemPrompt, Tools, Bash, LocalBash, ToolBash)
    for plugin in bash_stack:
        await bash_root.plugin(plugin)
    fs_root = await open_root()
    for plugin in (SystemPrompt, Tools, Filesystem):
        await fs_root.plugin(plugin)
    await fs_root.plugin(FsLocal, {"root": str(folder)})
    await fs_root.plugin(FsTools)
    write, edit = fs_ops(fs_root, folder)
    await write()  # the file edit changes
    mount_root = await open_root()

    async def mount() -> object:
        fiber = await mount_root.plugin(AgentCore, {"model": "m"})
        await fiber.dispose()
        return fiber

    return {
        "turn": turn.op(STEPS),
        "turn-short": turn.op(STEPS_SHORT),
        "bash": bash_op(bash_root),
        "write": write,
        "edit": edit,
        "mount": mount,
    }


def loaded_from(tree: Path) -> dict[str, str]:
    """Where ``dsh`` came from; raises ``AssertionError`` when it, or any ``dsh_*``
    package loaded, is not under ``tree`` (an editable install leaking in)."""
    root = tree.resolve()
    found = {
        name: str(Path(module.__file__).resolve())
        for name, module in sorted(sys.modules.items())
        if (name == "dsh" or name.startswith("dsh_")) and "." not in name and module.__file__
    }
    strays = {name: path for name, path in found.items() if not Path(path).is_relative_to(root)}
    assert not strays, f"imported from outside {root}: {strays}"
    return {"dsh": found["dsh"], "packages": str(len(found))}


async def serve(tree: Path, folder: Path) -> None:
    """The worker: build the workloads, then answer JSON lines on stdin, one line each
    on stdout: ``{"where": 1}`` → :func:`loaded_from`; ``{"time": name, "ops": n}`` →
    ``{"cpu": s, "wall": s}`` per op; ``{"calls": name}`` → ``{"calls": n}``."""
    async with roots() as open_root:
        ops = await cross_revision_ops(open_root, folder)
        lines = anyio.wrap_file(sys.stdin)
        async for line in lines:
            ask = json.loads(line)
            answer: dict[str, object]
            if "where" in ask:
                answer = dict(loaded_from(tree))
            elif "time" in ask:
                cpu, wall = await time_op(ops[ask["time"]], ask["ops"])
                answer = {"cpu": cpu, "wall": wall}
            else:
                answer = {"calls": await calls_of(ops[ask["calls"]])}
            print(json.dumps(answer), flush=True)
