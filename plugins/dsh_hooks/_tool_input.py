"""A hook's ``updatedInput`` (Claude Code's field names) back as a dsh tool's arguments.

The way there is ``dsh_permissions.claude_tool_input``; most dsh tools already take
Claude Code's field names (``file_path``, ``old_string``, ``content``, ``pattern``,
``todos``, ``prompt``...), and only the fields it renames come back renamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["from_tool_input"]

#: Claude Code field name -> dsh argument name, per dsh tool (the reverse of the renames
#: ``dsh_permissions.claude_tool_input`` makes).
_BACK: dict[str, dict[str, str]] = {
    "bash": {"timeout": "timeout_ms"},
    "grep": {"-i": "case_insensitive"},
}


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
