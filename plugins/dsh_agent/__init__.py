"""Agents: the registry, the factory seam, the handle protocol and agent events.

YAML name ``agents``; service ``AgentRegistry`` at ctx key ``agents``. See the README.
"""

from __future__ import annotations

from ._decision import HookDecision, HookDecisionError
from ._registry import (
    Agent,
    AgentArgumentError,
    AgentError,
    AgentFactory,
    AgentRegistry,
    AgentSpecs,
    AgentTypeError,
    NoModelError,
    StepBlocked,
    assemble_context_for,
)

plugin = AgentRegistry

__all__ = [
    "Agent",
    "AgentArgumentError",
    "AgentError",
    "AgentFactory",
    "AgentRegistry",
    "AgentSpecs",
    "AgentTypeError",
    "HookDecision",
    "HookDecisionError",
    "NoModelError",
    "StepBlocked",
    "assemble_context_for",
    "plugin",
]
