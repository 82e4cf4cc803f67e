"""Claude Code's names for dsh's tools and calls: the one place the mapping lives.

``dsh_permissions`` matches its rules on these names, and ``dsh_hooks`` hands them
(with :func:`claude_tool_input`) to command hooks.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["CLAUDE_TOOL_NAMES", "call_path", "claude_tool_input", "claude_tool_name"]

#: dsh tool name → Claude Code tool name (ARCHITECTURE §6.14). MCP tools are already
#: named ``mcp__<server>__<tool>`` by ``dsh_mcp``; any other tool keeps its dsh name.
CLAUDE_TOOL_NAMES: dict[str, str] = {
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

#: Argument renames from dsh's field names to Claude Code's, per Claude tool.
_RENAMES: dict[str, dict[str, str]] = {
    "Bash": {"timeout_ms": "timeout"},
    "Grep": {"case_insensitive": "-i"},
}


def claude_tool_name(call: Any) -> str:
    """Claude Code's name of the tool of ``call`` (a ``dsh_tools.ToolCall``, or a dsh
    tool name): ``bash`` → ``Bash``, … (see :data:`CLAUDE_TOOL_NAMES`); an MCP tool's
    name and any other name unchanged."""
    name: str = call if isinstance(call, str) else call.name
    return CLAUDE_TOOL_NAMES.get(name, name)


def claude_tool_input(call: Any) -> dict[str, Any]:
    """The call's arguments with Claude Code's field names (``tool_input`` of a hook):
    ``timeout_ms`` → ``timeout`` for ``Bash``, ``case_insensitive`` → ``-i`` for
    ``Grep``, ``web_search``'s ``queries`` also as its first ``query``; every other
    field as dsh names it (most are Claude's already: ``command``, ``file_path``,
    ``old_string``, ``pattern``, ``url``, ``todos``, ``prompt``…)."""
    tool = claude_tool_name(call)
    renames = _RENAMES.get(tool, {})
    given = call.input()
    shown = {renames.get(key, key): value for key, value in given.items()}
    queries = given.get("queries")
    if tool == "WebSearch" and isinstance(queries, list) and queries:
        shown.setdefault("query", queries[0])
    return shown


def _cwd(call: Any) -> str:
    agent = getattr(call, "agent", None)
    cwd = None if agent is None else agent.cwd
    return cwd if isinstance(cwd, str) else os.getcwd()


def call_path(call: Any) -> str | None:
    """The absolute, normalised path a file tool's call works on (``file_path`` of
    ``read``/``write``/``edit``, ``path`` of ``glob``/``grep``, their working
    directory when they name none), relative paths and ``~`` resolved against the
    calling agent's working directory; None for other tools."""
    name = call.name
    given = call.input()
    if name in ("read", "write", "edit"):
        path = given.get("file_path")
    elif name in ("glob", "grep"):
        path = given.get("path") or "."
    else:
        return None
    if not isinstance(path, str) or not path:
        return None
    cwd = _cwd(call)
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
