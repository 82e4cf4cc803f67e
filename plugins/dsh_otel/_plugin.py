"""The ``otel`` plugin: its config, and where its spans go."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Literal

from pydantic import BaseModel, ConfigDict

from dsh import Context, Plugin, PluginLoadError

__all__ = ["Otel", "OtelConfig"]


class OtelConfig(BaseModel):
    """Config of the ``otel`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: False: the plugin listens to nothing (tracing off, the plugin still loaded).
    enabled: bool = True
    #: Where spans go when the host application set no tracer provider: ``otlp``
    #: (OTLP over HTTP) or ``console`` (printed to stdout).
    exporter: Literal["otlp", "console"] = "otlp"
    #: The OTLP traces endpoint; None: the exporter's own default
    #: (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else ``http://localhost:4318/v1/traces``).
    endpoint: str | None = None
    #: The OTLP protocol; only ``http/protobuf`` is supported.
    protocol: Literal["http/protobuf"] = "http/protobuf"
    #: Headers of every OTLP request (an API key: ``!env HONEYCOMB_KEY``).
    headers: dict[str, str] = {}
    #: The ``service.name`` resource attribute of the provider this plugin makes.
    service_name: str = "dsh"
    #: Record message content, tool arguments and tool results on the spans.
    capture_content: bool = False


def _load_spans() -> ModuleType:
    try:
        from . import _spans
    except ImportError as exc:
        raise PluginLoadError(
            "otel exports OpenTelemetry spans with the opentelemetry-sdk package, which "
            "is not installed: pip install 'dsh-harness[otel]'"
        ) from exc
    return _spans


class Otel(Plugin):
    """Records ``invoke_agent``, ``chat`` and ``execute_tool`` spans (GenAI semantic
    conventions) from the agent, model and tool events; it needs no service."""

    name = "otel"
    Config = OtelConfig
    #: The services whose events it hears (injecting them declares the events).
    inject = ("agents", "llm")

    def __init__(self, ctx: Context, config: OtelConfig) -> None:
        super().__init__(ctx, config)
        self._spans = _load_spans()

    def setup(self) -> Iterator[Callable[[], object]]:
        if not self.config.enabled:
            return
        spans = self._spans
        provider, shutdown = spans.tracer_provider(self.config)
        if shutdown is not None:
            yield shutdown
        recorder = spans.SpanRecorder(provider, capture_content=self.config.capture_content)
        yield recorder.close
        ctx = self.ctx
        yield ctx.on("agent/turn-start", recorder.turn_start)
        yield ctx.on("agent/turn-end", recorder.turn_end)
        # Last: a call an earlier listener refuses does not run and has no span.
        yield ctx.on("tool/before", recorder.tool_before)
        yield ctx.on("tool/after", recorder.tool_after)
        yield ctx.on("llm/start", recorder.llm_start)
        yield ctx.on("llm/response", recorder.llm_response)
