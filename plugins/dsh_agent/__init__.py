"""Agents: the registry, the factory seam, the handle protocol and agent events.

YAML name ``agents``; service ``AgentRegistry`` at ctx key ``agents``.
"""

from __future__ import annotations

from ._registry import (
    Agent,
    AgentError,
    AgentFactory,
    AgentRegistry,
    AgentSpecs,
    StepBlocked,
    assemble_context_for,
)

plugin = AgentRegistry

__all__ = [
    "Agent",
    "AgentError",
    "AgentFactory",
    "AgentRegistry",
    "AgentSpecs",
    "StepBlocked",
    "assemble_context_for",
    "plugin",
]
