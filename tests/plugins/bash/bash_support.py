"""Helpers of the shell tests (bash, bash-local, tool-bash, jobs): runtimes with the
seam and the local executor, and checks on real processes."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from dsh import Context
from dsh.testing import Reply, ScriptedModel
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_bash import Bash, BashRequest, BashResult, BashRun
from dsh_bash_local import LocalBash
from dsh_system_prompt import SystemPrompt
from dsh_tools import Tools


@asynccontextmanager
async def shell(**local: Any) -> AsyncIterator[Context]:
    """A root with the bash seam and ``bash-local`` configured with ``local``."""
    async with Context() as root:
        await root.plugin(Bash)
        await root.plugin(LocalBash, local)
        yield root


@asynccontextmanager
async def tool_runtime(**local: Any) -> AsyncIterator[Context]:
    """:func:`shell` plus the system prompt and the tools service (no tool plugin)."""
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Bash)
        await root.plugin(LocalBash, local)
        yield root


@asynccontextmanager
async def agent_shell(
    *replies: Reply,
    core: dict[str, Any] | None = None,
    plugins: tuple[tuple[Any, Any], ...] = (),
    **local: Any,
) -> AsyncIterator[tuple[Context, ScriptedModel]]:
    """A root with agent-core (the agent "main" on a scripted model answering
    ``replies``, plus ``core`` settings), the bash seam and ``bash-local`` (``local``),
    then each ``(plugin, config)`` of ``plugins``."""
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted", **(core or {})})
        model = ScriptedModel(*replies)
        model.install(root)
        await root.plugin(Bash)
        await root.plugin(LocalBash, local)
        for plugin, config in plugins:
            await root.plugin(plugin, config)
        yield root, model


def main_agent(root: Context) -> Agent:
    """The agent "main" of :func:`agent_shell`."""
    agent: Agent = root.agents.get("main")
    return agent


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not died (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:  # it was reaped between the two looks
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def dies(pid: int, within: float = 10.0) -> None:
    """Wait (on a pidfd, no polling) until process ``pid`` has ended, then check with
    ``os.kill(pid, 0)`` that it is gone or a zombie; fails after ``within`` seconds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with anyio.fail_after(within):
            await anyio.wait_readable(fd)
    finally:
        os.close(fd)
    assert not alive(pid), f"process {pid} still runs"


def spill_file(path: str | None) -> tuple[str, int, int]:
    """A spill file's text, its permission bits and its folder's."""
    assert path is not None, "no spill file"
    spill = Path(path)
    mode = stat.S_IMODE(spill.stat().st_mode)
    return spill.read_text(), mode, stat.S_IMODE(spill.parent.stat().st_mode)


def entries(directory: Path) -> list[Path]:
    """What ``directory`` holds."""
    return list(directory.iterdir())


def read_pid(path: Path) -> int:
    """The process id a command wrote to ``path``."""
    return int(path.read_text().split()[0])


async def read_fifo(path: Path) -> str:
    """What a command writes to the FIFO ``path`` (opened for reading in a thread, so
    the wait is on the writer, not on a clock)."""

    def read() -> str:
        with path.open() as fifo:
            return fifo.read()

    return await anyio.to_thread.run_sync(read)


def make_fifo(directory: Path, name: str = "signal") -> Path:
    """A FIFO in ``directory`` a command can write to, to say it got somewhere."""
    path = directory / name
    os.mkfifo(path)
    return path


class Started:
    """An ``on_start`` hook: keeps the :class:`BashRun` and sets :attr:`event`."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.run: BashRun | None = None

    def __call__(self, run: BashRun) -> None:
        self.run = run
        self.event.set()


async def run(root: Context, command: str, **fields: Any) -> BashResult:
    """``root.bash.run`` of one command."""
    result: BashResult = await root.bash.run(BashRequest(command, **fields))
    return result
