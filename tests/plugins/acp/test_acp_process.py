"""``dsh acp`` as an editor runs it: a real process on stdio, driven by the
agent-client-protocol package's own client (``spawn_agent_process``), its model a
scripted plugin module loaded by the deployment.

The package's connections run on asyncio only, so these tests do too. They are slow
(a process each, two for the restart); the branches are covered in process by the
other test modules.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import RequestError, text_block

from dsh_acp import ALLOW_ONCE, REJECT_ONCE
from dsh_session_jsonl import FILE_NAME
from tests.plugins.acp.acp_support import Process, RecordingClient, dsh_acp, process_deployment
from tests.plugins.session_jsonl.jsonl_support import file_records

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


async def say(run: Process, session: str, words: str) -> str:
    answer = await run.conn.prompt(session_id=session, prompt=[text_block(words)])
    stop: str = answer.stop_reason
    return stop


async def test_turns_stream_over_stdio_and_stdout_carries_only_frames(tmp_path: Path) -> None:
    process_deployment(tmp_path)
    client = RecordingClient(ALLOW_ONCE, REJECT_ONCE)
    async with dsh_acp(tmp_path, client) as run:
        ready = await run.conn.initialize(protocol_version=1)
        assert ready.agent_capabilities is not None
        assert ready.agent_capabilities.load_session is True
        session = (await run.conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        assert await say(run, session, "hello") == "end_turn"
        assert client.timeline == [
            "agent_thought_chunk",
            "agent_message_chunk",
            "agent_message_chunk",
        ]
        assert (client.text("agent_thought_chunk"), client.text()) == ("pondering", "Hello!")

        client.updates.clear()
        client.timeline.clear()
        assert await say(run, session, "run printf ALLOWED") == "end_turn"
        assert client.timeline == [
            "tool_call",
            "permission",
            "tool_call_update",
            "agent_message_chunk",
        ]
        [start] = client.of_kind("tool_call")
        assert (start.title, start.kind, start.status) == (
            "bash: printf ALLOWED",
            "execute",
            "in_progress",
        )
        assert client.asked[0].tool_call.tool_call_id == start.tool_call_id
        [done] = client.of_kind("tool_call_update")
        assert (done.status, done.content[0].content.text) == ("completed", "ALLOWED")
        assert client.text() == "result: ALLOWED"

        client.updates.clear()
        assert await say(run, session, "run printf REFUSED") == "end_turn"
        [done] = client.of_kind("tool_call_update")
        assert done.status == "failed"
        assert done.content[0].content.text == "Error: the user declined: bash: printf REFUSED"

        client.updates.clear()
        assert await say(run, session, "plan") == "end_turn"
        [plan] = client.of_kind("plan")
        assert [(e.content, e.status) for e in plan.entries] == [
            ("look", "in_progress"),
            ("fix", "pending"),
        ]
    assert run.process.returncode == 0
    # A plugin's print went to stderr: stdout carried protocol frames only (the client
    # would have failed to parse anything else).
    assert "NOISE on stdout" in (tmp_path / "stderr.txt").read_text()


async def test_cancel_and_a_concurrent_prompt_over_stdio(tmp_path: Path) -> None:
    process_deployment(tmp_path)
    client = RecordingClient()
    async with dsh_acp(tmp_path, client) as run:
        await run.conn.initialize(protocol_version=1)
        session = (await run.conn.new_session(cwd=str(tmp_path))).session_id
        stops: list[str] = []
        async with anyio.create_task_group() as tg:

            async def hang() -> None:
                stops.append(await say(run, session, "hang"))

            tg.start_soon(hang)
            await client.wait_for(lambda: client.text() == "working")
            with pytest.raises(RequestError, match="is already running a prompt"):
                await say(run, session, "meanwhile")
            await run.conn.cancel(session_id=session)
        assert stops == ["cancelled"]
        assert await say(run, session, "after") == "end_turn"
        assert client.text().endswith("you said: after")
    assert run.process.returncode == 0


async def test_a_session_loads_after_the_process_restarted(tmp_path: Path) -> None:
    process_deployment(tmp_path)
    async with dsh_acp(tmp_path) as run:
        await run.conn.initialize(protocol_version=1)
        session = (await run.conn.new_session(cwd=str(tmp_path))).session_id
        assert await say(run, session, "hello") == "end_turn"
    client = RecordingClient()
    async with dsh_acp(tmp_path, client) as run:
        await run.conn.initialize(protocol_version=1)
        await run.conn.load_session(cwd=str(tmp_path), session_id=session, mcp_servers=[])
        assert [
            (s, kind) for (s, _), kind in zip(client.updates, client.timeline, strict=True)
        ] == [
            (session, "user_message_chunk"),
            (session, "agent_thought_chunk"),
            (session, "agent_message_chunk"),
        ]
        assert (client.text("user_message_chunk"), client.text()) == ("hello", "Hello!")
        assert await say(run, session, "more") == "end_turn"
        assert client.text() == "Hello!you said: more"
    assert run.process.returncode == 0


async def test_the_end_of_input_disposes_everything_and_exits_0(tmp_path: Path) -> None:
    process_deployment(tmp_path)
    client = RecordingClient()
    async with dsh_acp(tmp_path, client) as run:
        await run.conn.initialize(protocol_version=1)
        session = (await run.conn.new_session(cwd=str(tmp_path))).session_id
        async with anyio.create_task_group() as tg:
            tg.start_soon(say, run, session, "hang")
            await client.wait_for(lambda: client.text() == "working")
            # Drop the request (nothing is sent): the turn is still running when
            # the block below closes the process's stdin.
            tg.cancel_scope.cancel()
    assert run.process.returncode == 0
    assert (tmp_path / "disposed.txt").read_text() == "disposed"
    records = file_records(tmp_path / "sessions" / session / FILE_NAME)
    assert records[-1]["type"] == "turn/end"
    assert records[-1]["data"] == {"turn": 1, "reason": {"kind": "aborted", "reason": "disposed"}}
