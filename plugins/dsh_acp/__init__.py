"""The deployment's agent for editors: an Agent Client Protocol agent over stdio.

YAML name ``acp``; service ``AcpFrontend`` at ctx key ``frontend``. It never starts
serving on load: ``dsh acp FILE`` calls ``await ctx.frontend.run()``. The
``agent-client-protocol`` package (extra ``acp``) is imported only when a client is
served or one of its names below is first used (``AcpAgent`` and the mapping
functions). See this package's README for the contract.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._service import (
    EXIT_FAILED,
    EXIT_OK,
    AcpArgumentError,
    AcpError,
    AcpFrontend,
    AcpFrontendConfig,
)

if TYPE_CHECKING:
    from ._agent import AcpAgent, rpc_error
    from ._mapping import (
        TOOL_KINDS,
        plan_update,
        prompt_text,
        session_updates,
        stop_reason,
        tool_call_end,
        tool_call_start,
        tool_kind,
        tool_title,
    )
    from ._permission import ALLOW_ALWAYS, ALLOW_ONCE, PERMISSION_OPTIONS, REJECT_ONCE

plugin = AcpFrontend

#: The names that need the ``agent-client-protocol`` package, by module.
_LAZY = {
    **dict.fromkeys(("AcpAgent", "rpc_error"), "._agent"),
    **dict.fromkeys(
        ("ALLOW_ALWAYS", "ALLOW_ONCE", "PERMISSION_OPTIONS", "REJECT_ONCE"), "._permission"
    ),
    **dict.fromkeys(
        (
            "TOOL_KINDS",
            "plan_update",
            "prompt_text",
            "session_updates",
            "stop_reason",
            "tool_call_end",
            "tool_call_start",
            "tool_kind",
            "tool_title",
        ),
        "._mapping",
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "EXIT_FAILED",
    "EXIT_OK",
    "PERMISSION_OPTIONS",
    "REJECT_ONCE",
    "TOOL_KINDS",
    "AcpAgent",
    "AcpArgumentError",
    "AcpError",
    "AcpFrontend",
    "AcpFrontendConfig",
    "plan_update",
    "plugin",
    "prompt_text",
    "rpc_error",
    "session_updates",
    "stop_reason",
    "tool_call_end",
    "tool_call_start",
    "tool_kind",
    "tool_title",
]
