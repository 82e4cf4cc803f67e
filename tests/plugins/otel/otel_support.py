"""Helpers of the otel tests: a host tracer provider with the SDK's in-memory exporter,
handed to the plugin as if the host application had set it (the process-wide provider
can be set once only, so the tests never set it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["Spans", "host_spans"]


class Spans:
    """The finished spans of one test, by name."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.all() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def names(self) -> list[str]:
        return [span.name for span in self.all()]


def parent_of(span: ReadableSpan) -> Any:
    """The span id of ``span``'s parent, or None for a root."""
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.span_id


def trace_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id


@pytest.fixture
def host_spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spans]:
    """A provider the "host application" set, recording into memory."""
    spans = Spans()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: spans.provider)
    yield spans
    spans.provider.shutdown()
