"""Tools the model can call: layered registration, per-scope restriction, execution.

YAML name ``tools``; service ``Tools`` at ctx key ``tools`` (it injects
``system_prompt``). See this package's README for the contract.
"""

from __future__ import annotations

from ._errors import (
    DuplicateToolError,
    ToolArgumentsError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolRestrictionError,
    ToolTypeError,
)
from ._service import Tools, ToolsConfig, ToolsSpecs
from ._types import TOOL_NAME, ArgsT, Tool, ToolCall, ToolResult

plugin = Tools

__all__ = [
    "TOOL_NAME",
    "ArgsT",
    "DuplicateToolError",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolRegistrationError",
    "ToolRestrictionError",
    "ToolResult",
    "ToolTypeError",
    "Tools",
    "ToolsConfig",
    "ToolsSpecs",
    "plugin",
]
