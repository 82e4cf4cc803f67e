"""The Claude Code name of a dsh tool (what matchers and ``tool_name`` use)."""

from __future__ import annotations

__all__ = ["claude_tool_name"]

_NAMES = {
    "bash": "Bash",
    "read": "Read",
    "write": "Write",
    "edit": "Edit",
    "glob": "Glob",
    "grep": "Grep",
    "web_fetch": "WebFetch",
    "web_search": "WebSearch",
    "todo_write": "TodoWrite",
    "subagent": "Task",
}


def claude_tool_name(name: str) -> str:
    """Claude Code's name of the dsh tool ``name`` (MCP tools and others: unchanged)."""
    return _NAMES.get(name, name)
