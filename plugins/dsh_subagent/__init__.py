"""Subagents: the provider registry, runs, results and their events.

YAML name ``subagent``; service ``Subagents`` at ctx key ``subagents``. Providers
(``subagent-spawn``, ``subagent-fork``) register here; ``tool-subagent`` exposes them to
the model. See this package's README.
"""

from __future__ import annotations

from ._service import (
    DuplicateProviderError,
    NoProviderError,
    SubagentArgumentError,
    SubagentDepthError,
    SubagentError,
    Subagents,
    SubagentsConfig,
    SubagentSpecs,
    UnsupportedCapabilityError,
    delegation_depth,
    stop_reason_of,
)
from ._types import (
    CAPABILITIES,
    StopReason,
    SubagentOutcome,
    SubagentProvider,
    SubagentRequest,
    SubagentResult,
    SubagentRun,
)

plugin = Subagents

__all__ = [
    "CAPABILITIES",
    "DuplicateProviderError",
    "NoProviderError",
    "StopReason",
    "SubagentArgumentError",
    "SubagentDepthError",
    "SubagentError",
    "SubagentOutcome",
    "SubagentProvider",
    "SubagentRequest",
    "SubagentResult",
    "SubagentRun",
    "SubagentSpecs",
    "Subagents",
    "SubagentsConfig",
    "UnsupportedCapabilityError",
    "delegation_depth",
    "plugin",
    "stop_reason_of",
]
