"""The otel tests' fixtures."""

from __future__ import annotations

from tests.plugins.otel.otel_support import host_spans

__all__ = ["host_spans"]
