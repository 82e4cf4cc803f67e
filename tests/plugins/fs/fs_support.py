"""Helpers of the filesystem tests (``fs``, ``fs-local``, ``fs-policy``, ``tool-fs``):
a sandboxed layout on disk, calls from a fake agent, and the whole stack on a root."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dsh import Context
from dsh_approval import Approval
from dsh_fs import Filesystem
from dsh_fs_local import FsLocal
from dsh_fs_policy import ObservationPolicy
from dsh_system_prompt import SystemPrompt
from dsh_tool_fs import FsTools
from dsh_tools import ToolCall, ToolResult, Tools


@dataclass
class FakeAgent:
    """What the fs layers read from ``call.agent``: the session's cwd and id."""

    cwd: str | None
    session: Any = field(default_factory=lambda: SimpleNamespace(id="session-1"))


def agent_call(cwd: Path | str | None, session: str = "session-1") -> ToolCall:
    """A tool call from an agent whose session cwd is ``cwd`` and id is ``session``."""
    return ToolCall(
        id="call-1", agent=FakeAgent(None if cwd is None else str(cwd), SimpleNamespace(id=session))
    )


@dataclass
class Layout:
    """On disk, under a test's tmp_path: the workspace (``root``), a directory outside it
    (``outside``), and the platform temp dir the fence allows (``temp``); both of the
    latter are outside the workspace, and ``outside`` is outside the temp dir too."""

    root: Path
    outside: Path
    temp: Path

    def call(self, session: str = "session-1") -> ToolCall:
        """A call from an agent whose session cwd is the workspace."""
        return agent_call(self.root, session)

    def files_outside(self) -> list[Path]:
        """Everything under ``outside`` (an escape would leave a file here)."""
        return sorted(self.outside.rglob("*"))


def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    """Make the three directories and point ``tempfile.gettempdir()`` at ``temp`` (the
    pytest tmp_path is itself under the real temp dir, which the fence allows)."""
    found = Layout(tmp_path / "ws", tmp_path / "outside", tmp_path / "systemp")
    for directory in (found.root, found.outside, found.temp):
        directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(found.temp))
    return found


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    """The test's :func:`layout` (a fixture: a directory's ``conftest.py`` imports it)."""
    return layout(tmp_path, monkeypatch)


@asynccontextmanager
async def fs_stack(
    local: dict[str, Any] | None = None,
    *,
    policy: bool = True,
    tools: bool | dict[str, Any] = True,
    approval: dict[str, Any] | None = None,
) -> AsyncIterator[Context]:
    """A root with the system prompt, tools, ``fs``, ``fs-local`` (with ``local``), and
    optionally ``fs-policy``, ``tool-fs`` (a dict is its config) and ``approval`` (with
    its config)."""
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Filesystem)
        await root.plugin(FsLocal, local)
        if policy:
            await root.plugin(ObservationPolicy)
        if tools is not False:
            await root.plugin(FsTools, None if tools is True else tools)
        if approval is not None:
            await root.plugin(Approval, approval)
        yield root


async def run(root: Context, tool: str, call: ToolCall | None = None, **args: Any) -> ToolResult:
    """Execute ``tool`` with ``args`` through the tools service."""
    result: ToolResult = await root.tools.execute(tool, args, call)
    return result


def envelope(path: Path | str, body: str) -> str:
    """The ``read`` / ``write`` envelope around ``body``."""
    return f"<path>{path}</path>\n<type>file</type>\n<content>\n{body}\n</content>"
