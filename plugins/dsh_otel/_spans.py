"""Spans from the loop's events: ``invoke_agent`` per turn, ``chat`` per model request,
``execute_tool`` per tool call (OpenTelemetry GenAI semantic conventions)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from dsh_llm import (
    AssemblyError,
    BlockAssembler,
    Chunk,
    Finish,
    LlmRequest,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    Usage,
    UsageChunk,
)

if TYPE_CHECKING:
    from ._plugin import OtelConfig

__all__ = ["SpanRecorder", "message_parts", "tracer_provider"]

_log = logging.getLogger("dsh.otel")

#: The instrumentation scope of every span.
SCOPE = "dsh.otel"

#: The tool span of the call running in this task: a subagent started by the call
#: inherits it (its driver task copies this context) and its turn goes under it.
_CALL: ContextVar[_Open | None] = ContextVar("dsh_otel_call", default=None)


def tracer_provider(
    config: OtelConfig,
) -> tuple[trace.TracerProvider, Callable[[], Awaitable[None]] | None]:
    """The provider the spans go to, and how to shut it down: the one the host
    application set (used as it is: not shut down here), else one made from
    ``config`` with its exporter."""
    host = trace.get_tracer_provider()
    if not isinstance(host, trace.ProxyTracerProvider):
        return host, None
    provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
    provider.add_span_processor(_processor(config))

    async def shutdown() -> None:
        # Flushes what is queued; the exporter's I/O blocks, so off the event loop.
        await anyio.to_thread.run_sync(provider.shutdown)

    return provider, shutdown


def _processor(config: OtelConfig) -> SpanProcessor:
    if config.exporter == "console":
        # The stdout of now (the exporter's default is the one of its import).
        return SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stdout))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return BatchSpanProcessor(OTLPSpanExporter(endpoint=config.endpoint, headers=config.headers))


def message_parts(message: Message) -> dict[str, Any]:
    """``message`` in the GenAI conventions' message shape (``role`` and ``parts``)."""
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, ReasoningBlock):
            parts.append({"type": "reasoning", "content": block.text})
        elif isinstance(block, ToolCallBlock):
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
        else:
            parts.append(
                {"type": "tool_call_response", "id": block.tool_call_id, "response": block.content}
            )
    return {"role": message.role, "parts": parts}


def _messages_json(messages: Sequence[Message]) -> str:
    return json.dumps([message_parts(m) for m in messages], ensure_ascii=False)


#: The GenAI conventions' names of dsh's finish reasons (``stop``, ``aborted`` and
#: ``error`` keep theirs).
_FINISH_REASONS = {"tool-calls": "tool_calls", "max-tokens": "length"}


def _provider_name(provider: str) -> str:
    """``gen_ai.provider.name`` of an adapter: a plugin name loses its ``llm-``."""
    return provider.removeprefix("llm-") or "unknown"


@dataclass(slots=True)
class _Open:
    """An open span and the agent (session id) it belongs to."""

    span: Span
    session: str


def _failed(span: Span, message: str, error_type: str) -> None:
    span.set_status(Status(StatusCode.ERROR, message))
    span.set_attribute("error.type", error_type)


class SpanRecorder:
    """Listens to the loop's events and opens and ends the spans (one per plugin load).

    Its listeners never raise into the loop (the loop logs what an observer raises;
    the call and turn listeners log it themselves). ``close`` ends every span still
    open.
    """

    def __init__(self, provider: trace.TracerProvider, *, capture_content: bool) -> None:
        self._tracer = provider.get_tracer(SCOPE)
        self._content = capture_content
        #: The open turn span of each session (by session id).
        self._turns: dict[str, _Open] = {}
        #: The open tool spans, by (session id, call id).
        self._calls: dict[tuple[str, str], _Open] = {}
        #: The open chat spans, by the request object's id.
        self._chats: dict[int, Span] = {}

    def close(self) -> None:
        """End every open span (the plugin unloads) and forget them."""
        spans = [
            *self._chats.values(),
            *(o.span for o in self._calls.values()),
            *(o.span for o in self._turns.values()),
        ]
        self._chats.clear()
        self._calls.clear()
        self._turns.clear()
        for span in spans:
            span.end()

    def _parent(self, session: str) -> otel_context.Context:
        """The context of a span of ``session``'s agent: under its turn, when one runs."""
        turn = self._turns.get(session)
        if turn is None:
            return otel_context.Context()
        return trace.set_span_in_context(turn.span, otel_context.Context())

    # -- turns ---------------------------------------------------------------------------

    def turn_start(self, agent: Any, turn: int) -> None:
        """Open the turn's ``invoke_agent`` span."""
        try:
            self._open_turn(agent.session, turn)
        except Exception as exc:
            _log.error("recording the span of a turn failed", exc_info=exc)

    def _open_turn(self, session: Any, turn: int) -> None:
        meta = session.header.meta
        agent = str(meta.get("agent") or "agent")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": session.id,
            "dsh.turn": turn,
        }
        model = meta.get("model")
        if isinstance(model, str):
            attributes["gen_ai.request.model"] = model
        task = meta.get("task")
        parent = otel_context.Context()  # a root: a fleet task's, or a top agent's
        if task is not None:
            attributes["dsh.fleet.task.id"] = str(task)
        else:
            call = _CALL.get()
            if call is not None and call.session != session.id and call.span.is_recording():
                parent = trace.set_span_in_context(call.span, parent)
        span = self._tracer.start_span(
            f"invoke_agent {agent}", parent, kind=SpanKind.INTERNAL, attributes=attributes
        )
        self._turns[session.id] = _Open(span, session.id)

    def turn_end(self, agent: Any, turn: int, reason: Mapping[str, Any]) -> None:
        """End the turn's span, and those of its calls that never finished (refused
        by a later ``tool/before`` listener, or aborted)."""
        session = agent.session.id
        for key in [key for key in self._calls if key[0] == session]:
            unfinished = self._calls.pop(key).span
            _failed(unfinished, "the call did not finish (refused or aborted)", "NOT_FINISHED")
            unfinished.end()
        opened = self._turns.pop(session, None)
        if opened is None:
            return
        span = opened.span
        kind = str(reason.get("kind", "completed"))
        span.set_attribute("dsh.turn.end", kind)
        if kind == "error":
            _failed(span, str(reason.get("message", "")), str(reason.get("code", "UNKNOWN")))
        span.end()

    # -- tool calls ---------------------------------------------------------------------

    def tool_before(self, call: Any) -> None:
        """Open the call's ``execute_tool`` span; answers nothing (no opinion)."""
        try:
            session = call.agent.session.id
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": "function",
            }
            if self._content:
                arguments = call.arguments
                attributes["gen_ai.tool.call.arguments"] = (
                    arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
                )
            span = self._tracer.start_span(
                f"execute_tool {call.name}",
                self._parent(session),
                kind=SpanKind.INTERNAL,
                attributes=attributes,
            )
            opened = self._calls[(session, call.id)] = _Open(span, session)
            _CALL.set(opened)
        except Exception as exc:
            _log.error("recording the span of a tool call failed", exc_info=exc)

    def tool_after(self, call: Any, result: Any) -> None:
        """End the call's span with its result; adds nothing to it."""
        opened = self._calls.pop((call.agent.session.id, call.id), None)
        if opened is None:
            return
        span = opened.span
        content = str(result.content)
        if self._content:
            span.set_attribute("gen_ai.tool.call.result", content)
        if result.is_error:
            _failed(span, content, result.code or "TOOL_ERROR")
        span.end()

    # -- model requests -----------------------------------------------------------------

    def llm_start(self, request: LlmRequest, provider: str) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _provider_name(provider),
            "gen_ai.request.model": request.model,
        }
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        session = request.session_id
        if session is not None:
            attributes["gen_ai.conversation.id"] = session
        if self._content:
            attributes["gen_ai.input.messages"] = _messages_json(request.messages)
            if request.system is not None:
                attributes["gen_ai.system_instructions"] = json.dumps(
                    [{"type": "text", "content": request.system}], ensure_ascii=False
                )
        parent = otel_context.Context() if session is None else self._parent(session)
        self._chats[id(request)] = self._tracer.start_span(
            f"chat {request.model}", parent, kind=SpanKind.CLIENT, attributes=attributes
        )

    def llm_response(self, request: LlmRequest, chunks: Sequence[Chunk] | None) -> None:
        span = self._chats.pop(id(request), None)
        if span is None:
            return
        if chunks is None:
            _failed(span, "the stream ended before its finish (cancelled or closed)", "cancelled")
            span.end()
            return
        finish = Finish("stop")  # a stream without a finish chunk (as the assembler reads it)
        usage: Usage | None = None
        for chunk in reversed(chunks):  # the finish and the usage come last
            if isinstance(chunk, Finish):
                finish = chunk
            elif isinstance(chunk, UsageChunk):
                usage = chunk.usage
                break
        attributes: dict[str, Any] = {
            "gen_ai.response.finish_reasons": (_FINISH_REASONS.get(finish.reason, finish.reason),)
        }
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
        if self._content:
            answer = _answer(chunks)
            if answer is not None:
                attributes["gen_ai.output.messages"] = _messages_json([answer])
        span.set_attributes(attributes)
        if finish.failure is not None:
            _failed(span, finish.failure.message, finish.failure.code)
        span.end()


def _answer(chunks: Sequence[Chunk]) -> Message | None:
    """The assistant message ``chunks`` make, or None when they contradict themselves."""
    assembler = BlockAssembler()
    try:
        for chunk in chunks:
            assembler.push(chunk)
    except AssemblyError:
        return None
    return assembler.result().message
