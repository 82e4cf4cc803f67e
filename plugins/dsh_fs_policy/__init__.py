"""The observation policy of the ``fs`` seam: read before you write, and write only
what you read.

YAML name ``fs-policy`` (injects ``fs``). See this package's README for the contract.
"""

from __future__ import annotations

from ._policy import FsPolicyConfig, ObservationPolicy, Observations, session_key

plugin = ObservationPolicy

__all__ = ["FsPolicyConfig", "ObservationPolicy", "Observations", "plugin", "session_key"]
