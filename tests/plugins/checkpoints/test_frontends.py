"""``/undo`` and ``/rewind`` typed in the terminal chat, and announced over ACP."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_checkpoints import Checkpoints
from dsh_fs import Filesystem
from dsh_fs_local import FsLocal
from dsh_stdio_agent import EXIT_OK
from dsh_tool_fs import FsTools
from tests.plugins.acp.acp_support import acp_rig
from tests.plugins.checkpoints.ckpt_support import write_turn
from tests.plugins.stdio_agent.stdio_support import front_rig

pytestmark = pytest.mark.anyio

PLUGINS = ((Filesystem, None), (FsLocal, None), (FsTools, None), (Checkpoints, None))


async def test_undo_and_rewind_in_the_terminal(tmp_path: Path) -> None:
    core = {"agents": [{"id": "main", "model": "scripted", "cwd": str(tmp_path)}]}
    replies = [*write_turn("a.txt", "one"), *write_turn("a.txt", "two")]
    async with front_rig(*replies, core=core, plugins=PLUGINS) as r:
        r.lines.feed("first", "second", "/undo", "/undo", "/rewind", "/rewind 2", "/exit")
        assert await r.front.run() == EXIT_OK
        out = r.out.getvalue()
        target = tmp_path / "a.txt"
        assert f"restored turn 2's changes: {target}" in out
        assert f"restored the undo of turn 2 (restore 1): {target}" in out
        assert "1: first  [1 file(s)]\n2: second  [1 file(s)]" in out
        assert target.read_text() == "one"
        talking_to = r.root.agents.get("main")
        assert talking_to.session.header.meta["rewound_from"]["turn"] == 2
        assert f"continuing in session {talking_to.session.id}" in out


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_acp_announces_undo_and_rewind(tmp_path: Path) -> None:
    async with acp_rig(tmp_path, plugins=PLUGINS) as a:
        await a.new()
        await a.client.wait_for(lambda: a.client.commands)
        announced = {c.name for c in a.client.commands[-1][1].available_commands}
    assert {"undo", "rewind"} <= announced
