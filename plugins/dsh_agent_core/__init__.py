"""The agent spine bundle (YAML name ``agent-core``)."""

from __future__ import annotations

from ._bundle import AgentCore, AgentCoreConfig

plugin = AgentCore

__all__ = ["AgentCore", "AgentCoreConfig", "plugin"]
