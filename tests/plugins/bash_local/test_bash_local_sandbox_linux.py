"""The bash tool in the real Linux sandbox (issue 25, ARCHITECTURE §6.13), observed
from inside commands: writes inside the writable roots work and outside fail (``..``,
absolute paths and symlinks alike), read-only refuses every write, no TCP connect
reaches a loopback server the test runs, background jobs are confined the same way,
and an allowed ``unsandboxed`` call is not. Each on bubblewrap and on Landlock, skipped
where that mechanism does not work."""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh import Context
from dsh.testing import ScriptedModel, run_turn, tool_call, tool_calls
from dsh_agent_core import AgentCore
from dsh_approval import Approval
from dsh_bash import Bash
from dsh_bash_local import LocalBash
from dsh_jobs import Jobs
from dsh_sandbox import Sandbox, SandboxUnavailableError
from dsh_tool_bash import ToolBash
from tests.support import event_data

dsh_sandbox_linux = pytest.importorskip("dsh_sandbox_linux")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox"),
]


@pytest.fixture(params=["bubblewrap", "landlock"])
def mechanism(request: pytest.FixtureRequest) -> str:
    """The ``sandbox-linux`` mechanism a test runs on."""
    name: str = request.param
    return name


@asynccontextmanager
async def confined(
    mechanism: str, workspace: Path, *calls: dict[str, Any], **local: Any
) -> AsyncIterator[tuple[Context, list[str]]]:
    """The agent "main" in ``workspace`` calling ``bash`` with each of ``calls`` (one
    turn), through ``sandbox-linux`` on ``mechanism`` (``bash-local`` with ``local``, default
    ``workspace-write`` with the workspace as the only root), jobs and an approval
    service allowing everything; yields the root and the results."""
    script = tool_calls(*(tool_call("bash", call) for call in calls))
    async with Context() as root:
        core = {"model": "scripted", "agents": [{"id": "main", "cwd": str(workspace)}]}
        await root.plugin(AgentCore, core)
        ScriptedModel(script, "done").install(root)
        await root.plugin(Sandbox)
        await root.plugin(dsh_sandbox_linux.plugin, {"mechanism": mechanism})
        try:
            assert await root.sandbox.probe() == mechanism
        except SandboxUnavailableError as exc:  # pragma: no cover - a machine without it
            pytest.skip(f"{mechanism} does not work here: {exc}")
        await root.plugin(Bash)
        settings = {"sandbox": "workspace-write", "writable_roots": ["."]} | local
        await root.plugin(LocalBash, settings)
        await root.plugin(Jobs)
        await root.plugin(Approval, {"policy": "allow"})
        root.approval.set_responder(lambda request: True)
        await root.plugin(ToolBash)
        agent = root.agents.get("main")
        assert await run_turn(agent, "go") == {"kind": "completed"}
        yield root, [r["content"] for r in event_data(agent.session, "tool/result")]


def places(tmp_path: Path) -> tuple[Path, Path]:
    workspace, outside = tmp_path / "work", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    return workspace, outside


async def test_writes_inside_the_roots_work_and_outside_fail(
    tmp_path: Path, mechanism: str
) -> None:
    workspace, outside = places(tmp_path)
    (workspace / "escape").symlink_to(outside)
    calls = [
        {"command": "echo in > inside.txt && mkdir sub && echo ok"},
        {"command": "echo x > ../outside/dotdot"},
        {"command": f"echo x > {outside}/absolute"},
        {"command": "echo x > escape/symlink"},
        {"command": f"mkdir {outside}/dir"},
    ]
    async with confined(mechanism, workspace, *calls) as (_, results):
        pass
    assert results[0] == "ok\n"
    assert (workspace / "inside.txt").read_text() == "in\n"
    for result in results[1:]:
        assert result.endswith("[exit code: 1]"), result
        assert "Read-only file system" in result or "Permission denied" in result, result
    assert list(outside.iterdir()) == []


async def test_read_only_refuses_every_write(tmp_path: Path, mechanism: str) -> None:
    workspace, _ = places(tmp_path)
    calls = [{"command": "touch new"}, {"command": "echo ok > /dev/null && echo fine"}]
    async with confined(mechanism, workspace, *calls, sandbox="read-only") as (_, results):
        pass
    assert results[0].endswith("[exit code: 1]"), results[0]
    assert results[1] == "fine\n"
    assert list(workspace.iterdir()) == []


async def test_no_connection_reaches_a_loopback_server(tmp_path: Path, mechanism: str) -> None:
    workspace, _ = places(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        port = server.getsockname()[1]
        command = f"echo hi > /dev/tcp/127.0.0.1/{port} && echo connected"
        async with confined(mechanism, workspace, {"command": command}) as (_, results):
            pass
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    assert "connected" not in results[0]
    assert results[0].endswith("[exit code: 1]"), results[0]


async def test_a_background_job_is_confined_too(tmp_path: Path, mechanism: str) -> None:
    workspace, outside = places(tmp_path)
    command = "echo x > ../outside/job; echo in > job.txt; echo done"
    async with confined(mechanism, workspace, {"command": command, "run_in_background": True}) as (
        root,
        results,
    ):
        job = root.jobs.get("j1", agent=root.agents.get("main"))
        with anyio.fail_after(30):
            await job.wait()
        out, err = job.read_new()
    assert results == ["started background job j1"]
    assert out.text == "done\n"
    assert "Read-only file system" in err.text or "Permission denied" in err.text
    assert (workspace / "job.txt").read_text() == "in\n"
    assert list(outside.iterdir()) == []


async def test_an_allowed_unsandboxed_call_writes_outside(tmp_path: Path, mechanism: str) -> None:
    workspace, outside = places(tmp_path)
    call = {"command": "echo x > ../outside/allowed && echo ok", "unsandboxed": True}
    async with confined(mechanism, workspace, call) as (_, results):
        pass
    assert results == ["ok\n"]
    assert (outside / "allowed").read_text() == "x\n"
