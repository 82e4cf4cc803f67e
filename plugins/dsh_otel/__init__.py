"""OpenTelemetry spans of agent turns, model requests and tool calls.

YAML name ``otel`` (extra ``otel``). Spans follow the OpenTelemetry GenAI semantic
conventions: ``invoke_agent <agent>``, ``chat <model>``, ``execute_tool <tool>``. See
this package's README and docs/rfc/0042-otel.md.
"""

from __future__ import annotations

from ._plugin import Otel, OtelConfig

plugin = Otel

__all__ = ["Otel", "OtelConfig", "plugin"]
