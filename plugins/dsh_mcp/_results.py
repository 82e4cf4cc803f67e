"""What the model reads of an MCP tool result."""

from __future__ import annotations

import json

from mcp import types

from dsh_tools import ToolResult

from ._errors import MCP_TOOL_ERROR

__all__ = ["render"]


def render(result: types.CallToolResult) -> ToolResult:
    """The text of each text block, and ``[<type>]`` for a block of another type
    (``[image]``, ``[audio]``, ``[resource]``, ``[resource_link]``), joined by ``\\n``.

    Structured content is shown as compact JSON only when the result has no content
    blocks: a server that returns both puts the same JSON in a text block (as the
    protocol asks), which the model should not read twice. ``isError`` makes it
    ``Error: <text>`` with the code ``MCP_TOOL_ERROR``.
    """
    parts = [
        block.text if isinstance(block, types.TextContent) else f"[{block.type}]"
        for block in result.content
    ]
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = "\n".join(parts)
    if result.isError:
        return ToolResult(f"Error: {text}", True, MCP_TOOL_ERROR)
    return ToolResult(text)
