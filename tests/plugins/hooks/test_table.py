"""Which hooks an event selects: matchers on Claude Code tool names, each command once."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from dsh_hooks import HookGroup
from dsh_hooks._table import Hook, HookTable
from dsh_hooks._tool_input import from_tool_input
from dsh_permissions import claude_tool_input
from dsh_tools import ToolCall


def group(matcher: str, *commands: str, timeout: float | None = None) -> HookGroup:
    hooks = [{"command": command, "timeout": timeout} for command in commands]
    return HookGroup.model_validate({"matcher": matcher, "hooks": hooks})


def to_tool_input(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return claude_tool_input(ToolCall("c", name=tool, arguments=arguments))


def commands(table: HookTable, event: str, *names: str) -> list[str]:
    return [hook.command for hook in table.select(event, *names)]


@pytest.mark.parametrize(
    ("matcher", "name", "selected"),
    [
        ("", "Bash", True),
        ("*", "Bash", True),
        ("Bash", "Bash", True),
        ("Bash", "BashOutput", False),  # a plain name matches exactly
        ("bash", "Bash", False),  # case-sensitive
        ("Edit|Write", "Write", True),
        ("Edit|Write", "Read", False),
        ("mcp__.*", "mcp__files__read", True),
        ("mcp__files", "mcp__files__read", False),
        ("Notebook.*", "NotebookEdit", True),
    ],
)
def test_matchers_are_regexes_matched_in_full(matcher: str, name: str, selected: bool) -> None:
    table = HookTable([("PreToolUse", group(matcher, "h"))], 60)
    assert commands(table, "PreToolUse", name) == (["h"] if selected else [])


def test_a_matcher_may_name_the_dsh_tool_too() -> None:
    table = HookTable([("PreToolUse", group("edit", "h"))], 60)
    assert commands(table, "PreToolUse", "Edit", "edit") == ["h"]


def test_events_without_a_name_select_every_group() -> None:
    table = HookTable([("Stop", group("Bash", "a")), ("Stop", group("", "b"))], 60)
    assert commands(table, "Stop") == ["a", "b"]
    assert commands(table, "SessionEnd") == []
    assert "Stop" in table
    assert "SessionEnd" not in table


def test_identical_commands_run_once_with_the_first_timeout() -> None:
    table = HookTable(
        [
            ("PreToolUse", group("Bash", "fmt", "guard", timeout=5)),
            ("PreToolUse", group(".*", "guard", "other")),
        ],
        60,
    )
    assert table.select("PreToolUse", "Bash") == [
        Hook("fmt", 5),
        Hook("guard", 5),
        Hook("other", 60),
    ]


def test_an_invalid_matcher_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match=r"matcher '\(' is not a valid regex"):
        group("(", "h")


def test_bash_and_grep_arguments_take_claude_code_names_and_back() -> None:
    shown = to_tool_input("bash", {"command": "ls", "timeout_ms": 5, "description": "d"})
    assert shown == {"command": "ls", "timeout": 5, "description": "d"}
    assert from_tool_input("bash", {"command": "pwd", "timeout": 9}, shown) == {
        "command": "pwd",
        "timeout_ms": 9,
    }
    shown = to_tool_input("grep", {"pattern": "x", "case_insensitive": True})
    assert shown == {"pattern": "x", "-i": True}
    assert from_tool_input("grep", shown, shown) == {"pattern": "x", "case_insensitive": True}


def test_other_tools_keep_their_names() -> None:
    arguments = {"file_path": "/a", "old_string": "x", "new_string": "y", "replace_all": False}
    assert to_tool_input("edit", arguments) == arguments
    assert from_tool_input("mcp__s__t", {"q": 1}, {}) == {"q": 1}


def test_web_search_shows_its_first_query_as_query() -> None:
    shown = to_tool_input("web_search", {"queries": ["a", "b"]})
    assert shown == {"queries": ["a", "b"], "query": "a"}
    # A changed query is the new first query; an unchanged one leaves the list as given.
    assert from_tool_input("web_search", {**shown, "query": "c"}, shown) == {"queries": ["c", "b"]}
    assert from_tool_input("web_search", {"query": "c"}, shown) == {"queries": ["c", "b"]}
    assert from_tool_input("web_search", {"query": "a", "queries": ["x"]}, shown) == {
        "queries": ["x"]
    }
    assert from_tool_input("web_search", {"query": "c", "queries": "bad"}, shown) == {
        "queries": ["c"]
    }
