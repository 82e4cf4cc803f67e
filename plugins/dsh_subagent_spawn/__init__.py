"""The ``spawn`` subagent provider: a fresh child that does not see the parent's
conversation.

YAML name ``subagent-spawn``; it needs the ``subagents`` service. See the README.
"""

from __future__ import annotations

from dsh_subagent_inprocess import provider_plugin

__all__ = ["SubagentSpawn", "plugin"]

#: Registers the provider ``spawn`` (``inherits_parent_context=False``).
SubagentSpawn = provider_plugin("spawn", inherits_parent_context=False, name="subagent-spawn")

plugin = SubagentSpawn
