"""The acp-agent example as an editor runs it: ``dsh acp`` on stdio, a permission asked
before the command runs, the session stored under the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block

from dsh_acp import ALLOW_ONCE
from tests.plugins.acp.acp_support import RecordingClient, dsh_acp
from tests.support import EXAMPLES, run_dsh

ACP_AGENT = EXAMPLES / "acp-agent" / "dsh.yml"


def test_check() -> None:
    done = run_dsh("check", str(ACP_AGENT))
    assert done.returncode == 0, done.stderr
    assert "ok (8 plugin entries active" in done.stdout


# The agent-client-protocol package's client runs on asyncio only.
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_editor_session_runs_an_allowed_command(tmp_path: Path) -> None:
    client = RecordingClient(ALLOW_ONCE)
    async with dsh_acp(tmp_path, client, ACP_AGENT) as run:
        await run.conn.initialize(protocol_version=1)
        session = (await run.conn.new_session(cwd=str(tmp_path))).session_id
        answer = await run.conn.prompt(session_id=session, prompt=[text_block("run printf hi")])
        assert answer.stop_reason == "end_turn"
    assert run.process.returncode == 0
    assert client.timeline == ["tool_call", "permission", "tool_call_update", "agent_message_chunk"]
    assert client.text() == "The command printed: hi"
    assert (tmp_path / ".dsh" / "sessions" / session).is_dir()
