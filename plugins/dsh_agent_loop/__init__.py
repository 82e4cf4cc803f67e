"""The agent loop: turns, steps, model calls, concurrent tool calls, the backstop.

YAML name ``agent-loop``; registers the ``model`` and ``cwd`` prompt variables and is
the agent factory of ``dsh_agent``. See the README.
"""

from __future__ import annotations

from ._agent import LoopAgent
from ._limits import MaxStepsError, UsageLimitError
from ._loop import AgentLoop, AgentLoopConfig, AgentSpec
from ._tool_calls import ABORTED, ABORTED_BEFORE_DISPATCH, run_tool_calls
from ._usage import (
    NO_USAGE,
    USAGE_EVENT,
    Price,
    add_usage,
    cost,
    format_usage,
    session_usage,
    turn_usage,
)

plugin = AgentLoop

__all__ = [
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "NO_USAGE",
    "USAGE_EVENT",
    "AgentLoop",
    "AgentLoopConfig",
    "AgentSpec",
    "LoopAgent",
    "MaxStepsError",
    "Price",
    "UsageLimitError",
    "add_usage",
    "cost",
    "format_usage",
    "plugin",
    "run_tool_calls",
    "session_usage",
    "turn_usage",
]
