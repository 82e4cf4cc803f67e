"""Helpers of the checkpoint tests: an agent on a scripted model with the fs stack and
checkpoints, in a workspace under the test's tmp_path."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from dsh import Context
from dsh.testing import ScriptedModel, text, tool_call, tool_calls
from dsh_agent_core import AgentCore
from dsh_checkpoints import Checkpoints
from dsh_fs import Filesystem
from dsh_fs_local import FsLocal
from dsh_tool_fs import FsTools

__all__ = ["blobs", "edit_turn", "file_events", "runtime", "write_turn"]


def write_turn(path: str, content: str) -> list[Any]:
    """The replies of one turn that writes ``content`` to ``path``, then says done."""
    return [tool_calls(tool_call("write", {"file_path": path, "content": content})), text("ok")]


def edit_turn(path: str, old: str, new: str) -> list[Any]:
    """The replies of one turn that reads ``path`` then edits ``old`` into ``new``."""
    return [
        tool_calls(tool_call("read", {"file_path": path})),
        tool_calls(tool_call("edit", {"file_path": path, "old_string": old, "new_string": new})),
        text("ok"),
    ]


@asynccontextmanager
async def runtime(
    workspace: Path,
    *replies: Any,
    config: Mapping[str, Any] | None = None,
    plugins: tuple[tuple[Any, Any], ...] = (),
) -> AsyncIterator[Context]:
    """A root with agent ``main`` (cwd ``workspace``) on the scripted ``replies``,
    fs, fs-local, tool-fs, then ``plugins``, then checkpoints with ``config``."""
    async with Context() as root:
        await root.plugin(
            AgentCore,
            {"agents": [{"id": "main", "model": "scripted", "cwd": str(workspace)}]},
        )
        ScriptedModel(*replies).install(root)
        await root.plugin(Filesystem)
        await root.plugin(FsLocal)
        await root.plugin(FsTools)
        for plugin, plugin_config in plugins:
            await root.plugin(plugin, plugin_config)
        await root.plugin(Checkpoints, dict(config or {}))
        yield root


def file_events(session: Any) -> list[dict[str, Any]]:
    """The data of the session's ``checkpoint/file`` events."""
    return [dict(e.data) for e in session.events if e.type == "checkpoint/file"]


def blobs(workspace: Path) -> set[str]:
    """The digests in the workspace's default store."""
    folder = workspace / ".dsh" / "checkpoints" / "blobs"
    return {p.name for p in folder.iterdir()} if folder.exists() else set()
