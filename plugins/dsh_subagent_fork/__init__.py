"""The ``fork`` subagent provider: a child seeded with the parent's completed turns
(every event up to and including the last ``turn/end``).

YAML name ``subagent-fork``; it needs the ``subagents`` service. See the README.
"""

from __future__ import annotations

from dsh_subagent_inprocess import provider_plugin

__all__ = ["SubagentFork", "plugin"]

#: Registers the provider ``fork`` (``inherits_parent_context=True``).
SubagentFork = provider_plugin("fork", inherits_parent_context=True, name="subagent-fork")

plugin = SubagentFork
