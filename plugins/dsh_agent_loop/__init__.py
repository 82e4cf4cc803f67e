"""The agent loop: turns, steps, model calls, concurrent tool calls, the backstop.

YAML name ``agent-loop``; registers the ``model`` and ``cwd`` prompt variables.
"""

from __future__ import annotations

from ._agent import LoopAgent
from ._loop import AgentLoop, AgentLoopConfig, AgentSpec
from ._tool_calls import run_tool_calls

plugin = AgentLoop

__all__ = ["AgentLoop", "AgentLoopConfig", "AgentSpec", "LoopAgent", "plugin", "run_tool_calls"]
