"""Checkpoints outlive the process: resume then undo on both stores, and a crash
between a blob's write and its event leaves no dangling reference."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import run_turn
from dsh_session_jsonl import JsonlSessions
from dsh_session_sqlite import SqliteSessions
from tests.plugins.checkpoints.ckpt_support import blobs, file_events, runtime, write_turn

pytestmark = pytest.mark.anyio


def store(kind: str, tmp_path: Path) -> tuple[tuple[Any, Any], ...]:
    if kind == "jsonl":
        return ((JsonlSessions, {"root": str(tmp_path / "sessions")}),)
    return ((SqliteSessions, {"path": str(tmp_path / "sessions.db")}),)


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_resume_then_undo(tmp_path: Path, kind: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_bytes(b"before\r\n")
    async with runtime(
        workspace, *write_turn("a.txt", "after"), plugins=store(kind, tmp_path)
    ) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "change it")
        session_id = agent.session.id
    assert (workspace / "a.txt").read_text() == "after"
    async with runtime(workspace, plugins=store(kind, tmp_path)) as root:
        resumed = await root.agents.resume(session_id)
        assert [e["path"] for e in file_events(resumed.session)] == [str(workspace / "a.txt")]
        done = await root.checkpoints.undo(resumed)
        assert done.restored == (str(workspace / "a.txt"),)
    assert (workspace / "a.txt").read_bytes() == b"before\r\n"
    async with runtime(workspace, plugins=store(kind, tmp_path)) as root:
        again = await root.agents.resume(session_id)
        await root.checkpoints.undo(again)  # the restore was recorded durably: undo it
    assert (workspace / "a.txt").read_text() == "after"


CRASH = """
import os, sys, anyio
from dsh import Context
from dsh_agent_core import AgentCore
from dsh_checkpoints import BlobStore, Checkpoints
from dsh_fs import Filesystem
from dsh_fs_local import FsLocal
from dsh_session_jsonl import JsonlSessions
from dsh_tools import ToolCall

workspace, sessions = sys.argv[1:3]
real_put = BlobStore.put

def put_then_stop(self, data, digest=None):
    done = real_put(self, data, digest)
    print(done, flush=True)  # the blob is stored; the event is not appended yet
    while True:
        os.pause()

BlobStore.put = put_then_stop

async def main():
    async with Context() as root:
        await root.plugin(AgentCore, {"agents": [{"id": "main", "cwd": workspace}]})
        await root.plugin(JsonlSessions, {"root": sessions})
        await root.plugin(Filesystem)
        await root.plugin(FsLocal)
        await root.plugin(Checkpoints)
        agent = root.agents.get("main")
        agent.session.append("turn/start", {"turn": 1})
        message = {"role": "user", "content": [{"type": "text", "text": "go"}]}
        agent.session.append("user/message", {"turn": 1, "step": 1, "message": message})
        print(agent.session.id, flush=True)
        await root.fs.write_text("a.txt", "new", ToolCall("c", agent=agent))

anyio.run(main)
"""


def test_sigkill_between_the_blob_and_its_event_leaves_no_dangling_reference(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("old")
    with subprocess.Popen(
        [sys.executable, "-c", CRASH, str(workspace), str(tmp_path / "s")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[3],
    ) as child:
        assert child.stdout is not None
        session_id = child.stdout.readline().strip()
        digest = child.stdout.readline().strip()  # the child says so once the blob is stored
        assert digest, "the child ended before it stored the blob"
        os.kill(child.pid, signal.SIGKILL)
    assert (workspace / "a.txt").read_text() == "old"  # never replaced
    assert blobs(workspace) == {digest}  # an orphan blob: fine
    log = (tmp_path / "s" / session_id / "session.jsonl").read_text()
    assert '"user/message"' in log
    assert "checkpoint/file" not in log
