"""A tool that delegates to a subagent provider, worded by that provider.

YAML name ``tool-subagent`` (several instances, each with its own ``tool_name``); it
needs the ``subagents``, ``tools`` and ``agents`` services. It also shares the
``send_message`` and ``list_agents`` tools. See this package's README.
"""

from __future__ import annotations

from ._plugin import (
    SubagentToolError,
    ToolFilter,
    ToolSubagent,
    ToolSubagentConfig,
    background_notice,
    failure,
)
from ._shared import SubagentNotFoundError, ToolNameTakenError
from ._wording import describe_tool, parameters_for

plugin = ToolSubagent

__all__ = [
    "SubagentNotFoundError",
    "SubagentToolError",
    "ToolFilter",
    "ToolNameTakenError",
    "ToolSubagent",
    "ToolSubagentConfig",
    "background_notice",
    "describe_tool",
    "failure",
    "parameters_for",
    "plugin",
]
