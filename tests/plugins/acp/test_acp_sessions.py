"""The ACP agent side in process, on a recording client: capabilities, sessions,
streamed turns, stop reasons, cancellation, concurrent prompts.

These call the ``AcpAgent`` methods directly (the package's connection is asyncio-only,
the agent side is not), so they run on both backends; ``test_acp_process.py`` drives
the same through a real ``dsh acp`` process and the package's own client.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block
from acp.schema import ImageContentBlock

from dsh.testing import Mark, Wait, capture_logs, failure, text, tool_call, tool_calls, until
from dsh_acp import AcpError
from dsh_agent import StepBlocked
from dsh_fs import Filesystem
from dsh_fs_local import FsLocal
from dsh_llm import BlockEnd, BlockStart, Finish, ReasoningDelta, TextDelta
from dsh_session_jsonl import JsonlSessions
from dsh_tool_fs import FsTools
from dsh_tool_todo import ToolTodo
from tests.plugins.acp.acp_support import RecordingClient, acp_rig, acp_root

pytestmark = pytest.mark.anyio

FS = ((Filesystem, None), (FsLocal, None), (FsTools, None))


async def test_initialize_states_what_the_agent_does(tmp_path: Path) -> None:
    async with acp_rig(tmp_path) as r:
        plain = await r.agent.initialize(protocol_version=1)
    assert plain.protocol_version == 1
    caps = plain.agent_capabilities
    assert caps is not None
    assert caps.load_session is False
    assert caps.prompt_capabilities is not None
    prompts = caps.prompt_capabilities
    assert (prompts.image, prompts.audio, prompts.embedded_context) == (False, False, True)
    assert caps.mcp_capabilities is not None
    assert (caps.mcp_capabilities.http, caps.mcp_capabilities.sse) == (False, False)
    assert plain.auth_methods == []
    assert plain.agent_info is not None
    assert plain.agent_info.name == "dsh"
    stored = ((JsonlSessions, {"root": str(tmp_path / "s"), "fsync": False}),)
    async with acp_rig(tmp_path, plugins=stored) as r:
        later = await r.agent.initialize(protocol_version=7)
    assert later.protocol_version == 1
    assert later.agent_capabilities is not None
    assert later.agent_capabilities.load_session is True


async def test_a_new_session_is_a_new_agent_in_the_clients_cwd(tmp_path: Path) -> None:
    async with acp_rig(tmp_path, "first", "second") as r:
        one, two = await r.new(), await r.new()
        assert one != two
        agents = [r.dsh_agent(one), r.dsh_agent(two)]
        assert [a.id for a in agents] == ["acp-1", "acp-2"]
        assert [a.cwd for a in agents] == [str(tmp_path)] * 2
        assert all(a.model == "scripted" for a in agents)
        assert await r.say(one, "hi") == "end_turn"
        assert r.model.requests[0].session_id == one
        # The template agent is not one of them and ran nothing.
        assert r.root.agents.get("main").session.events == []


async def test_a_relative_or_missing_cwd_is_refused(tmp_path: Path) -> None:
    async with acp_rig(tmp_path) as r:
        with pytest.raises(RequestError, match='cwd must be an absolute path, got "work"') as bad:
            await r.agent.new_session(cwd="work")
        assert bad.value.code == -32602
        assert bad.value.data == {"code": "ACP_ARGUMENT"}
        with pytest.raises(RequestError, match="is not a directory"):
            await r.agent.new_session(cwd=str(tmp_path / "nowhere"))
        assert [a.id for a in r.root.agents.list()] == ["main"]


async def test_mcp_servers_from_the_client_are_ignored_with_a_warning(tmp_path: Path) -> None:
    async with acp_rig(tmp_path) as r:
        with capture_logs("dsh.acp") as logs:
            await r.agent.new_session(cwd=str(tmp_path), mcp_servers=[object()])
    assert any("ignoring the 1 MCP server(s)" in m for m in logs.messages())


async def test_sessions_copy_the_configured_agent_and_persona(tmp_path: Path) -> None:
    core = {"agents": [{"id": "a", "model": "other"}, {"id": "b", "max_tokens": 50}]}
    config = {"agent": "b", "persona": "You edit code for {{cwd}}."}
    async with acp_rig(tmp_path, "ok", core=core, config=config) as r:
        r.model.install(r.root, ["other"])
        session = await r.new()
        agent = r.dsh_agent(session)
        assert (agent.model, agent.max_tokens) == ("scripted", 50)
        await r.say(session, "hi")
    system = r.model.requests[0].system
    assert f"You edit code for {tmp_path}." in system
    assert "-bot" not in system


@pytest.mark.parametrize(
    ("core", "config", "message"),
    [
        ({"agents": [{"id": "a"}, {"id": "b"}]}, None, 'several agents are declared ("a", "b")'),
        (None, {"agent": "zed"}, 'unknown agent "zed"; known agents: "main"'),
        ({"model": None}, None, "there is no agent to serve"),
    ],
)
async def test_without_one_template_agent_a_session_is_refused(
    tmp_path: Path, core: dict[str, Any] | None, config: dict[str, Any] | None, message: str
) -> None:
    async with acp_rig(tmp_path, core=core, config=config) as r:
        with pytest.raises(RequestError, match=re.escape(message)) as refused:
            await r.new()
    assert refused.value.code == -32600
    assert refused.value.data == {"code": "ACP"}


async def test_a_text_turn_streams_thoughts_and_deltas_then_ends_the_turn(tmp_path: Path) -> None:
    reply = [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "let me "),
        ReasoningDelta(0, "think"),
        BlockEnd(0),
        BlockStart(1, "text"),
        TextDelta(1, "Hel"),
        TextDelta(1, "lo!"),
        BlockEnd(1),
        Finish("stop"),
    ]
    async with acp_rig(tmp_path, reply) as r:
        session = await r.new()
        assert await r.say(session, "hello") == "end_turn"
    client = r.client
    assert client.kinds(session) == [
        "agent_thought_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "agent_message_chunk",
    ]
    assert client.text() == "Hello!"
    assert client.text("agent_thought_chunk") == "let me think"
    assert r.model.requests[0].messages[-1].text == "hello"


async def test_a_tool_turn_shows_the_call_and_its_result(tmp_path: Path) -> None:
    replies = (tool_calls(tool_call("echo", {"text": "ping"}, id="c-1")), text("pong"))
    async with acp_rig(tmp_path, *replies) as r:
        session = await r.new()
        assert await r.say(session, "echo ping") == "end_turn"
    assert r.client.kinds() == ["tool_call", "tool_call_update", "agent_message_chunk"]
    [start] = r.client.of_kind("tool_call")
    assert (start.tool_call_id, start.title, start.kind, start.status) == (
        "c-1",
        "echo",
        "other",
        "in_progress",
    )
    assert start.raw_input == {"text": "ping"}
    [end] = r.client.of_kind("tool_call_update")
    assert (end.tool_call_id, end.status) == ("c-1", "completed")
    assert [c.content.text for c in end.content] == ["ping"]


async def test_a_write_and_an_edit_show_diffs(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    replies = (
        tool_calls(tool_call("write", {"file_path": "a.txt", "content": "two\n"})),
        tool_calls(
            tool_call("edit", {"file_path": "a.txt", "old_string": "two", "new_string": "3"})
        ),
        text("done"),
    )
    async with acp_rig(tmp_path, *replies, plugins=FS) as r:
        session = await r.new()
        assert await r.say(session, "change a.txt") == "end_turn"
    assert (tmp_path / "a.txt").read_text() == "3\n"
    write, edit = r.client.of_kind("tool_call")
    path = str(tmp_path / "a.txt")
    assert (write.kind, write.title) == ("edit", f"write: {path}")
    [diff] = write.content
    assert (diff.path, diff.old_text, diff.new_text) == (path, "one\n", "two\n")
    [diff] = edit.content
    assert (diff.path, diff.old_text, diff.new_text) == (path, "two", "3")
    assert [(loc.path, loc.line) for loc in edit.locations] == [(path, None)]
    assert [(u.status, u.content) for u in r.client.of_kind("tool_call_update")] == [
        ("completed", None),
        ("completed", None),
    ]


async def test_a_todo_list_becomes_the_plan(tmp_path: Path) -> None:
    todos = [{"content": "look", "status": "completed"}, {"content": "fix", "status": "pending"}]
    replies = (tool_calls(tool_call("todo_write", {"todos": todos})), text("planned"))
    async with acp_rig(tmp_path, *replies, plugins=((ToolTodo, None),)) as r:
        session = await r.new()
        assert await r.say(session, "plan") == "end_turn"
    assert r.client.kinds() == ["tool_call", "plan", "tool_call_update", "agent_message_chunk"]
    [plan] = r.client.of_kind("plan")
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("look", "completed", "medium"),
        ("fix", "pending", "medium"),
    ]
    assert r.client.of_kind("tool_call")[0].kind == "think"


async def test_the_token_limit_and_a_refusal_have_their_stop_reasons(tmp_path: Path) -> None:
    async with acp_rig(tmp_path, text("cut", finish="max-tokens"), "never") as r:
        session = await r.new()
        assert await r.say(session, "long") == "max_tokens"

        def refuse(agent: Any, messages: Any, turn: int, step: int, call_next: Any) -> Any:
            raise StepBlocked("not today")

        r.dsh_agent(session).ctx.on("agent/pre-step", refuse)
        assert await r.say(session, "again") == "refusal"


async def test_a_failed_turn_answers_with_a_json_rpc_error(tmp_path: Path) -> None:
    reply = [BlockStart(0, "text"), TextDelta(0, "part"), *failure("the model broke", "X_DOWN")]
    async with acp_rig(tmp_path, reply) as r:
        session = await r.new()
        with pytest.raises(RequestError, match="the turn failed: the model broke") as failed:
            await r.say(session, "go")
    assert failed.value.code == -32603
    assert failed.value.data == {"code": "X_DOWN", "turn": 1}
    # What streamed before the failure was shown.
    assert r.client.text() == "part"


async def test_cancel_ends_the_running_prompt_cancelled(tmp_path: Path) -> None:
    started, never = anyio.Event(), anyio.Event()
    reply = [BlockStart(0, "text"), TextDelta(0, "work"), Mark(started), Wait(never)]
    async with acp_rig(tmp_path, reply, "after") as r:
        session = await r.new()
        stops: list[str] = []
        async with anyio.create_task_group() as tg:

            async def prompt() -> None:
                stops.append(await r.say(session, "hang"))

            tg.start_soon(prompt)
            await started.wait()
            await r.agent.cancel(session_id=session)
        assert stops == ["cancelled"]
        assert r.dsh_agent(session).session.turn_end(1) == {"kind": "aborted", "reason": "user"}
        # The session goes on.
        assert await r.say(session, "next") == "end_turn"


async def test_a_cancel_before_the_turn_starts_sends_nothing(tmp_path: Path) -> None:
    started, never = anyio.Event(), anyio.Event()
    async with acp_rig(tmp_path, [Mark(started), Wait(never)]) as r:
        session = await r.new()
        agent = r.dsh_agent(session)
        agent.send("work queued before the prompt")
        await started.wait()
        stops: list[str] = []
        async with anyio.create_task_group() as tg:

            async def prompt() -> None:
                stops.append(await r.say(session, "mine"))

            tg.start_soon(prompt)
            await until(lambda: r.agent.prompting(session))
            await r.agent.cancel(session_id=session)
        assert stops == ["cancelled"]
        assert agent.session.last_turn() == 1  # "mine" never became a turn
        assert len(r.model.requests) == 1


async def test_a_cancel_with_nothing_running_is_ignored(tmp_path: Path) -> None:
    async with acp_rig(tmp_path, "ok") as r:
        session = await r.new()
        with capture_logs("dsh.acp") as logs:
            await r.agent.cancel(session_id=session)
            await r.agent.cancel(session_id="nope")
        assert await r.say(session, "hi") == "end_turn"
    assert logs.messages() == ["session/cancel for an unknown session nope"]


async def test_a_second_concurrent_prompt_is_refused(tmp_path: Path) -> None:
    started, release = anyio.Event(), anyio.Event()
    reply = [BlockStart(0, "text"), TextDelta(0, "slow"), Mark(started), Wait(release)]
    async with acp_rig(tmp_path, [*reply, BlockEnd(0), Finish("stop")]) as r:
        session = await r.new()
        stops: list[str] = []
        async with anyio.create_task_group() as tg:

            async def prompt() -> None:
                stops.append(await r.say(session, "first"))

            tg.start_soon(prompt)
            await started.wait()
            with pytest.raises(RequestError, match="is already running a prompt") as busy:
                await r.say(session, "second")
            release.set()
        assert busy.value.code == -32600
        assert stops == ["end_turn"]
        assert len(r.model.requests) == 1


async def test_prompts_to_unknown_sessions_and_bad_content_are_refused(tmp_path: Path) -> None:
    async with acp_rig(tmp_path) as r:
        with pytest.raises(RequestError, match='unknown session "nope"') as unknown:
            await r.say("nope", "hi")
        assert unknown.value.code == -32602
        session = await r.new()
        image = ImageContentBlock(type="image", data="AA==", mime_type="image/png")
        with pytest.raises(RequestError, match="image content is not supported"):
            await r.agent.prompt(prompt=[text_block("see"), image], session_id=session)
        assert r.model.requests == []


async def test_a_dropped_prompt_request_leaves_its_turn_to_session_cancel(
    tmp_path: Path,
) -> None:
    started, never = anyio.Event(), anyio.Event()
    async with acp_rig(tmp_path, [Mark(started), Wait(never)]) as r:
        session = await r.new()
        async with anyio.create_task_group() as tg:
            tg.start_soon(r.say, session, "hang")
            await started.wait()
            tg.cancel_scope.cancel()
        agent = r.dsh_agent(session)
        assert not r.agent.prompting(session)
        assert agent.status == "running"
        await r.agent.cancel(session_id=session)
        await agent.when_idle()
        assert agent.session.turn_end(1) == {"kind": "aborted", "reason": "user"}


async def test_updates_the_client_cannot_take_are_dropped(tmp_path: Path) -> None:
    client = RecordingClient(fail_updates=True)
    async with acp_rig(tmp_path, "still answered", client=client) as r:
        session = await r.new()
        with capture_logs("dsh.acp") as logs:
            assert await r.say(session, "hi") == "end_turn"
    assert client.updates == []
    assert any("was not delivered" in m for m in logs.messages())


async def test_an_event_that_cannot_be_shown_is_logged_not_raised(tmp_path: Path) -> None:
    async with acp_rig(tmp_path, plugins=((ToolTodo, None),)) as r:
        session = await r.new()
        with capture_logs("dsh.acp") as logs:
            r.dsh_agent(session).session.append("todo/write", {"todos": [{"status": "odd"}]})
    assert any("cannot show session event 0 (todo/write)" in m for m in logs.messages())


async def test_leaving_the_agent_side_disposes_the_session_agents(tmp_path: Path) -> None:
    started, never = anyio.Event(), anyio.Event()
    async with acp_root([Mark(started), Wait(never)]) as (root, _):
        front = root.frontend
        client = RecordingClient().as_client()
        async with front.open_agent(client) as agent:
            session = (await agent.new_session(cwd=str(tmp_path))).session_id
            running = root.agents.get("acp-1")
            running.send("hang")
            await started.wait()
            assert front.session_agents == {"acp-1"}
            with pytest.raises(AcpError, match="already serving a client"):
                async with front.open_agent(client):
                    pass  # pragma: no cover (the open raises)
        assert running.session.turn_end(1) == {"kind": "aborted", "reason": "disposed"}
        assert [a.id for a in root.agents.list()] == ["main"]
        assert root.sessions.get(session) is None
        assert front.session_agents == set()
        # The front-end can serve again.
        async with front.open_agent(client) as again:
            assert (await again.new_session(cwd=str(tmp_path))).session_id != session
