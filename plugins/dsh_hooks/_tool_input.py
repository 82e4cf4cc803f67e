"""A dsh tool call's arguments as Claude Code's ``tool_input``, and ``updatedInput`` back.

Most dsh tools already take Claude Code's field names (``file_path``, ``old_string``,
``content``, ``pattern``, ``todos``, ``prompt``...); only these are renamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["from_tool_input", "to_tool_input"]

#: dsh argument name -> Claude Code field name, per dsh tool.
_RENAMED: dict[str, dict[str, str]] = {
    "bash": {"timeout_ms": "timeout"},
    "grep": {"case_insensitive": "-i"},
}
_BACK = {tool: {cc: dsh for dsh, cc in names.items()} for tool, names in _RENAMED.items()}


def to_tool_input(tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The ``tool_input`` of a call of the dsh tool ``tool`` with ``arguments``."""
    names = _RENAMED.get(tool, {})
    shown = {names.get(key, key): value for key, value in arguments.items()}
    if tool == "web_search":
        queries = shown.get("queries")
        if isinstance(queries, list) and queries:
            # Claude Code's WebSearch takes one query: the first, the list beside it.
            shown["query"] = queries[0]
    return shown


def from_tool_input(
    tool: str, updated: Mapping[str, Any], shown: Mapping[str, Any]
) -> dict[str, Any]:
    """The dsh arguments a hook's ``updatedInput`` names (Claude Code field names);
    ``shown`` is the ``tool_input`` the hook was given."""
    names = _BACK.get(tool, {})
    arguments = {names.get(key, key): value for key, value in updated.items()}
    if tool == "web_search" and "query" in arguments:
        query = arguments.pop("query")
        if query != shown.get("query"):
            # A changed ``query`` is a new first query (of the list the hook left).
            queries = arguments.get("queries", shown.get("queries"))
            rest = queries[1:] if isinstance(queries, list) else []
            arguments["queries"] = [query, *rest]
    return arguments
