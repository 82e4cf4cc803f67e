"""Approval questions become ``session/request_permission`` in the session the asking
call belongs to: allow once, always allow (remembered per kind and title), reject."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh.testing import capture_logs, text, tool_call, tool_calls
from dsh_acp import ALLOW_ALWAYS, ALLOW_ONCE, REJECT_ONCE
from dsh_approval import Approval, ApprovalRequest
from dsh_bash import Bash
from dsh_bash_local import LocalBash
from dsh_tool_bash import ToolBash
from dsh_tools import ToolCall
from tests.plugins.acp.acp_support import CANCEL, FAIL, RecordingClient, Rig, acp_rig

pytestmark = pytest.mark.anyio

ASK = ((Bash, None), (LocalBash, None), (ToolBash, None), (Approval, {"policy": "ask"}))


def run_then_quote(request: Any) -> Any:
    """``run <command>`` calls bash; a tool result is quoted."""
    last = request.messages[-1]
    if last.role == "tool":
        return text(f"result: {last.content[0].content}")
    return tool_calls(tool_call("bash", {"command": last.text[4:]}))


def outcome(rig: Rig) -> tuple[str, str]:
    """The status and text of the last tool call's update."""
    update = rig.client.of_kind("tool_call_update")[-1]
    return update.status, update.content[0].content.text


async def test_an_allowed_command_runs_after_its_call_is_shown(tmp_path: Path) -> None:
    client = RecordingClient(ALLOW_ONCE)
    async with acp_rig(tmp_path, respond=run_then_quote, plugins=ASK, client=client) as r:
        session = await r.new()
        assert await r.say(session, "run printf HELLO") == "end_turn"
    assert client.timeline == ["tool_call", "permission", "tool_call_update", "agent_message_chunk"]
    [asked] = client.asked
    [start] = client.of_kind("tool_call")
    assert asked.session_id == session
    assert asked.tool_call.tool_call_id == start.tool_call_id
    assert asked.tool_call.title is None  # the call is already shown
    assert [(o.option_id, o.kind) for o in asked.options] == [
        ("allow_once", "allow_once"),
        ("allow_always", "allow_always"),
        ("reject_once", "reject_once"),
    ]
    assert outcome(r) == ("completed", "HELLO")
    assert client.text() == "result: HELLO"


@pytest.mark.parametrize("answer", [REJECT_ONCE, CANCEL, FAIL])
async def test_a_rejected_or_cancelled_permission_declines(tmp_path: Path, answer: str) -> None:
    client = RecordingClient(answer)
    async with acp_rig(tmp_path, respond=run_then_quote, plugins=ASK, client=client) as r:
        session = await r.new()
        with capture_logs("dsh.acp") as logs:
            assert await r.say(session, "run printf NOPE") == "end_turn"
    assert outcome(r) == ("failed", "Error: the user declined: bash: printf NOPE")
    failed = [m for m in logs.messages() if "the permission request failed" in m]
    assert len(failed) == (answer == FAIL)


async def test_always_allow_is_remembered_for_that_action_in_that_session(
    tmp_path: Path,
) -> None:
    client = RecordingClient(ALLOW_ALWAYS, REJECT_ONCE, ALLOW_ONCE)
    async with acp_rig(tmp_path, respond=run_then_quote, plugins=ASK, client=client) as r:
        session = await r.new()
        for _ in range(2):
            assert await r.say(session, "run printf SAME") == "end_turn"
            assert outcome(r) == ("completed", "SAME")
        assert len(client.asked) == 1
        # Another command is asked about (and rejected).
        assert await r.say(session, "run printf OTHER") == "end_turn"
        assert outcome(r)[0] == "failed"
        # Another session asks again.
        other = await r.new()
        assert await r.say(other, "run printf SAME") == "end_turn"
        assert outcome(r) == ("completed", "SAME")
    assert [a.session_id for a in client.asked] == [session, session, other]


async def test_a_subagents_question_goes_to_its_root_session(tmp_path: Path) -> None:
    client = RecordingClient(ALLOW_ONCE)
    async with acp_rig(tmp_path, plugins=ASK, client=client) as r:
        session = await r.new()
        child_session = r.root.sessions.prepare(cwd=str(tmp_path), meta={"parent_session": session})
        child = r.root.agents.create("child", model="scripted", session=child_session)
        request = ApprovalRequest(
            kind="bash", title="bash: make", detail="make all", call=ToolCall("c7", child)
        )
        assert await r.root.approval.request(request) is True
    [asked] = client.asked
    assert asked.session_id == session
    shown = asked.tool_call
    assert (shown.tool_call_id, shown.title, shown.kind, shown.status) == (
        f"{child_session.id}/c7",
        "bash: make",
        "execute",
        "pending",
    )
    assert shown.raw_input == {"detail": "make all"}


async def test_a_question_from_outside_the_sessions_is_declined(tmp_path: Path) -> None:
    client = RecordingClient(ALLOW_ONCE, ALLOW_ONCE)
    async with acp_rig(tmp_path, plugins=ASK, client=client) as r:
        main = r.root.agents.get("main")
        orphan = r.root.sessions.prepare(meta={"parent_session": "gone"})
        stray = r.root.agents.create("stray", model="scripted", session=orphan)
        with capture_logs("dsh.acp") as logs:
            for call in (None, ToolCall("c1", None), ToolCall("c2", main), ToolCall("c3", stray)):
                request = ApprovalRequest(kind="bash", title="bash: ls", call=call)
                assert await r.root.approval.request(request) is False
    assert client.asked == []
    assert len([m for m in logs.messages() if "belongs to no ACP session" in m]) == 4


async def test_without_the_approval_service_nothing_is_asked(tmp_path: Path) -> None:
    shell = ((Bash, None), (LocalBash, None), (ToolBash, None))
    async with acp_rig(tmp_path, respond=run_then_quote, plugins=shell) as r:
        session = await r.new()
        assert await r.say(session, "run printf FREE") == "end_turn"
    assert r.client.asked == []
    assert outcome(r) == ("completed", "FREE")
