"""How session events, tool calls, todo lists, turn ends and prompts read in ACP terms
(pure functions: no runtime, no backend)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.schema import (
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextResourceContents,
)

from dsh_acp import (
    AcpArgumentError,
    plan_update,
    prompt_text,
    session_updates,
    stop_reason,
    tool_call_end,
    tool_call_start,
    tool_kind,
    tool_title,
)
from dsh_acp._mapping import DIFF_MAX_BYTES, TITLE_CHARS
from dsh_session import SessionEvent


def event(kind: str, **data: Any) -> SessionEvent:
    return SessionEvent(0, kind, 0.0, data)


def call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"turn": 1, "step": 1, "call_id": call_id, "name": name, "arguments": raw}


def result(name: str, content: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"call_id": "c1", "name": name, "content": content, "is_error": is_error}


def test_each_shipped_tool_has_its_kind_and_others_are_other() -> None:
    kinds = {
        name: tool_kind(name)
        for name in (
            "read", "write", "edit", "bash", "job_output", "job_list", "job_kill", "grep",
            "glob", "web_fetch", "web_search", "todo_write", "echo", "mcp__git__log",
        )
    }  # fmt: skip
    assert kinds == {
        "read": "read",
        "write": "edit",
        "edit": "edit",
        "bash": "execute",
        "job_output": "execute",
        "job_list": "execute",
        "job_kill": "execute",
        "grep": "search",
        "glob": "search",
        "web_fetch": "fetch",
        "web_search": "fetch",
        "todo_write": "think",
        "echo": "other",
        "mcp__git__log": "other",
    }


def test_a_title_quotes_the_telling_argument_on_one_line() -> None:
    assert tool_title("bash", {"command": "  ls -la  "}) == "bash: ls -la"
    assert tool_title("bash", {"command": "cd x\nmake"}) == "bash: cd x…"
    long = "echo " + "a" * 200
    cut = tool_title("bash", {"command": long})
    assert cut == f"bash: {long[: TITLE_CHARS - 1]}…"
    assert tool_title("read", {"file_path": "src/a.py"}, "/project") == "read: /project/src/a.py"
    assert tool_title("read", {"file_path": "/etc/../etc/hosts"}) == "read: /etc/hosts"
    assert tool_title("grep", {"pattern": "TODO", "path": "src"}) == "grep: TODO"
    assert tool_title("web_search", {"queries": ["a", "b"]}) == "web_search: a; b"
    assert tool_title("job_kill", {"job_id": "j1"}) == "job_kill: j1"
    assert tool_title("subagent", {"description": "survey", "prompt": "…"}) == "subagent: survey"


def test_a_title_without_a_telling_argument_is_the_name() -> None:
    assert tool_title("list_agents", {}) == "list_agents"
    assert tool_title("bash", {"command": "   "}) == "bash"
    assert tool_title("echo", {"text": "hi"}) == "echo"
    assert tool_title("echo", "not json") == "echo"


def test_a_relative_path_without_a_cwd_is_taken_from_the_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert tool_title("read", {"file_path": "a.txt"}) == f"read: {tmp_path / 'a.txt'}"


def test_a_tool_call_starts_in_progress_with_its_arguments() -> None:
    start = tool_call_start(call("bash", {"command": "ls"}, "call-9"), "/project")
    assert start.session_update == "tool_call"
    assert (start.tool_call_id, start.title, start.kind) == ("call-9", "bash: ls", "execute")
    assert start.status == "in_progress"
    assert start.raw_input == {"command": "ls"}
    assert start.content is None
    assert start.locations is None


def test_arguments_that_are_not_an_object_are_passed_raw() -> None:
    assert tool_call_start(call("read", "{oops")).raw_input == "{oops"
    broken = tool_call_start(call("read", "[1, 2]"))
    assert broken.raw_input == "[1, 2]"
    assert broken.locations is None
    assert tool_call_start(call("read", {"file_path": ""})).locations is None


def test_a_read_is_located_at_its_file_and_line() -> None:
    start = tool_call_start(call("read", {"file_path": "a.py", "offset": 40}), "/project")
    assert start.kind == "read"
    assert start.locations is not None
    assert [(loc.path, loc.line) for loc in start.locations] == [("/project/a.py", 40)]
    plain = tool_call_start(call("read", {"file_path": "/x/b.py"}))
    assert plain.locations is not None
    assert [(loc.path, loc.line) for loc in plain.locations] == [("/x/b.py", None)]


def test_an_edit_shows_the_replaced_text_as_a_diff() -> None:
    data = call("edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"})
    for live in (True, False):
        start = tool_call_start(data, "/project", live)
        assert start.kind == "edit"
        assert start.content is not None
        [diff] = start.content
        assert diff.type == "diff"
        assert (diff.path, diff.old_text, diff.new_text) == ("/project/a.py", "x = 1", "x = 2")
    odd = tool_call_start(call("edit", {"file_path": "a.py", "old_string": 3}), "/project")
    assert odd.content is None
    assert odd.locations is not None


def test_a_write_shows_the_file_it_replaces_while_live(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    data = call("write", {"file_path": "a.txt", "content": "new\n"})
    start = tool_call_start(data, str(tmp_path))
    assert start.content is not None
    [diff] = start.content
    assert (diff.path, diff.old_text, diff.new_text) == (str(target), None, "new\n")
    target.write_text("old\n")
    [diff] = tool_call_start(data, str(tmp_path)).content or []
    assert diff.old_text == "old\n"
    # Replayed: the file has changed since, so no diff is shown.
    assert tool_call_start(data, str(tmp_path), live=False).content is None
    assert tool_call_start(call("write", {"file_path": "a.txt"}), str(tmp_path)).content is None


def test_a_write_over_a_file_that_cannot_be_shown_has_no_diff(tmp_path: Path) -> None:
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "big").write_bytes(b"a" * (DIFF_MAX_BYTES + 1))
    (tmp_path / "dir").mkdir()
    for name in ("bin", "big", "dir"):
        data = call("write", {"file_path": name, "content": "x"})
        assert tool_call_start(data, str(tmp_path)).content is None, name


def test_a_tool_result_completes_or_fails_the_call_with_its_text() -> None:
    done = tool_call_end(result("bash", "HI\n"))
    assert done.session_update == "tool_call_update"
    assert (done.tool_call_id, done.status) == ("c1", "completed")
    assert done.content is not None
    assert [c.content.text for c in done.content] == ["HI\n"]
    failed = tool_call_end(result("bash", "Error: no", is_error=True))
    assert failed.status == "failed"
    assert [c.content.text for c in failed.content or []] == ["Error: no"]


def test_a_write_or_edit_that_succeeded_keeps_its_diff() -> None:
    for name in ("write", "edit"):
        assert tool_call_end(result(name, "Wrote a.txt")).content is None
        failed = tool_call_end(result(name, "Error: denied", is_error=True))
        assert failed.status == "failed"
        assert [c.content.text for c in failed.content or []] == ["Error: denied"]


def test_a_todo_list_is_the_plan() -> None:
    update = plan_update(
        [{"content": "look", "status": "completed"}, {"content": "fix", "status": "in_progress"}]
    )
    assert update.session_update == "plan"
    assert [(e.content, e.status, e.priority) for e in update.entries] == [
        ("look", "completed", "medium"),
        ("fix", "in_progress", "medium"),
    ]
    assert plan_update([]).entries == []


def test_turn_ends_map_to_stop_reasons() -> None:
    assert stop_reason({"kind": "completed"}) == "end_turn"
    assert stop_reason({"kind": "max-tokens"}) == "max_tokens"
    assert stop_reason({"kind": "blocked", "message": "no"}) == "refusal"
    assert stop_reason({"kind": "aborted", "reason": "user"}) == "cancelled"
    assert stop_reason({"kind": "interrupted"}) == "cancelled"
    assert stop_reason(None) == "cancelled"
    assert stop_reason({"kind": "error", "message": "boom", "code": "X"}) is None
    assert stop_reason({}) is None


def test_live_events_stream_deltas_and_skip_whole_messages() -> None:
    def live(kind: str, **data: Any) -> list[Any]:
        return session_updates(event(kind, **data), "/project")

    [text] = live("assistant/chunk", chunk={"type": "text-delta", "index": 0, "text": "Hi"})
    assert (text.session_update, text.content.text) == ("agent_message_chunk", "Hi")
    [thought] = live("assistant/chunk", chunk={"type": "reasoning-delta", "index": 0, "text": "h"})
    assert (thought.session_update, thought.content.text) == ("agent_thought_chunk", "h")
    assert live("assistant/chunk", chunk={"type": "block-start", "index": 0}) == []
    message = {"role": "assistant", "content": [{"type": "text", "text": "Hi"}]}
    assert live("assistant/message", message=message) == []
    assert live("user/message", message={"role": "user", "content": []}) == []
    assert live("turn/end", turn=1, reason={"kind": "completed"}) == []
    [start] = live("tool/call", **call("bash", {"command": "ls"}))
    assert start.session_update == "tool_call"
    [end] = live("tool/result", **result("bash", "x"))
    assert end.session_update == "tool_call_update"
    [plan] = live("todo/write", todos=[{"content": "a", "status": "pending"}])
    assert plan.session_update == "plan"


def test_a_replay_shows_whole_messages_and_skips_deltas() -> None:
    def replay(kind: str, **data: Any) -> list[Any]:
        return session_updates(event(kind, **data), live=False)

    assert replay("assistant/chunk", chunk={"type": "text-delta", "index": 0, "text": "Hi"}) == []
    user = {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    [said] = replay("user/message", message=user)
    assert (said.session_update, said.content.text) == ("user_message_chunk", "hello")
    answer = {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "hm"},
            {"type": "text", "text": "Hi"},
            {"type": "tool-call", "id": "c1", "name": "echo", "arguments": "{}"},
        ],
    }
    updates = replay("assistant/message", message=answer, interrupted=True)
    assert [(u.session_update, u.content.text) for u in updates] == [
        ("agent_thought_chunk", "hm"),
        ("agent_message_chunk", "Hi"),
    ]
    results = {"role": "tool", "content": [{"type": "tool-result", "tool_call_id": "c1"}]}
    assert replay("user/message", message=results) == []


def test_a_prompt_is_its_text_links_and_embedded_text() -> None:
    blocks = [
        text_block("Look at "),
        ResourceContentBlock(type="resource_link", name="a.py", uri="file:///w/a.py"),
        text_block(" please."),
        EmbeddedResourceContentBlock(
            type="resource", resource=TextResourceContents(uri="file:///w/b.py", text="b = 1")
        ),
    ]
    assert prompt_text(blocks) == (
        'Look at [a.py](file:///w/a.py) please.\n<context ref="file:///w/b.py">\nb = 1\n'
        "</context>\n"
    )


def test_a_prompt_with_other_content_or_no_text_is_refused() -> None:
    image = ImageContentBlock(type="image", data="AA==", mime_type="image/png")
    with pytest.raises(AcpArgumentError, match="image content is not supported"):
        prompt_text([text_block("see"), image])
    blob = EmbeddedResourceContentBlock(
        type="resource", resource=BlobResourceContents(uri="file:///x", blob="AA==")
    )
    with pytest.raises(AcpArgumentError, match="resource content is not supported"):
        prompt_text([blob])
    with pytest.raises(AcpArgumentError, match="holds no text") as caught:
        prompt_text([text_block("  ")])
    assert caught.value.code == "ACP_ARGUMENT"
    assert caught.value.rpc_code == -32602
