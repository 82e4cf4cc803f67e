"""The dsh name of an MCP tool: ``mcp__<server>__<tool>`` in the tool-name grammar."""

from __future__ import annotations

import hashlib
import re

__all__ = ["tool_name"]

_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")
_LIMIT = 64
_KEEP = 55


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with every character outside ``[a-zA-Z0-9_-]``
    replaced by ``_``. A name that this changed, or that is over 64 characters, is cut
    to 55 characters and suffixed with ``_`` and the first 8 hex digits of the sha256
    of the original name, so that two names differing only where they were rewritten
    or cut stay apart."""
    original = f"mcp__{server}__{tool}"
    name = _OUTSIDE.sub("_", original)
    if name == original and len(name) <= _LIMIT:
        return name
    digest = hashlib.sha256(original.encode("utf-8")).hexdigest()[:8]
    return f"{name[:_KEEP]}_{digest}"
