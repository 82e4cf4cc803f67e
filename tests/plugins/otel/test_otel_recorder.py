"""``SpanRecorder`` on its own: requests outside any turn, events it has no span for,
listeners that get what they cannot read (they log, never raise), message parts."""

from __future__ import annotations

import json
from types import SimpleNamespace

from dsh.testing import capture_logs, errors_logged
from dsh_llm import BlockEnd, LlmRequest, Message, ReasoningBlock, TextBlock, TextDelta
from dsh_otel._spans import SpanRecorder, message_parts
from tests.plugins.otel.otel_support import Spans


def recorder(capture_content: bool = False) -> tuple[Spans, SpanRecorder]:
    spans = Spans()
    return spans, SpanRecorder(spans.provider, capture_content=capture_content)


def test_a_request_outside_any_turn_is_a_root_chat_span() -> None:
    spans, record = recorder(capture_content=True)
    plain = LlmRequest(model="m", messages=(Message.user("hi"),), max_tokens=5)
    in_session = LlmRequest(model="m", messages=(), session_id="s1")
    record.llm_start(plain, "llm-anthropic")
    record.llm_start(in_session, "")
    record.llm_response(plain, None)
    record.llm_response(in_session, None)
    first, second = spans.all()
    assert first.parent is None
    assert second.parent is None
    assert first.attributes is not None
    assert first.attributes["gen_ai.provider.name"] == "anthropic"
    assert first.attributes["gen_ai.request.max_tokens"] == 5
    assert "gen_ai.conversation.id" not in first.attributes
    assert "gen_ai.system_instructions" not in first.attributes
    assert second.attributes is not None
    assert second.attributes["gen_ai.provider.name"] == "unknown"
    assert second.attributes["gen_ai.conversation.id"] == "s1"


def test_the_system_prompt_is_content() -> None:
    spans, record = recorder(capture_content=True)
    request = LlmRequest(model="m", messages=(), system="be brief")
    record.llm_start(request, "p")
    record.llm_response(request, None)
    (span,) = spans.all()
    assert span.attributes is not None
    assert json.loads(str(span.attributes["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "be brief"}
    ]


def test_events_without_an_open_span_are_ignored() -> None:
    spans, record = recorder()
    agent = SimpleNamespace(session=SimpleNamespace(id="s1"))
    record.turn_end(agent, 1, {"kind": "completed"})
    record.tool_after(SimpleNamespace(agent=agent, id="c1"), None)
    record.llm_response(LlmRequest(model="m", messages=()), None)
    assert spans.all() == ()


def test_a_listener_that_cannot_read_its_event_logs_and_does_not_raise() -> None:
    spans, record = recorder()
    with capture_logs() as logs:
        record.turn_start(object(), 1)
        record.tool_before(object())
    assert [r.getMessage() for r in errors_logged(logs)] == [
        "recording the span of a turn failed",
        "recording the span of a tool call failed",
    ]
    assert spans.all() == ()


def test_close_ends_what_is_open() -> None:
    spans, record = recorder()
    record.llm_start(LlmRequest(model="m", messages=()), "p")
    record.close()
    record.close()
    assert [span.name for span in spans.all()] == ["chat m"]


def test_message_parts_follow_the_conventions_shape() -> None:
    message = Message("assistant", (ReasoningBlock("think"), TextBlock("say")))
    assert message_parts(message) == {
        "role": "assistant",
        "parts": [{"type": "reasoning", "content": "think"}, {"type": "text", "content": "say"}],
    }


def test_an_answer_whose_chunks_contradict_themselves_has_no_output_content() -> None:
    spans, record = recorder(capture_content=True)
    request = LlmRequest(model="m", messages=())
    record.llm_start(request, "p")
    record.llm_response(request, (BlockEnd(5), TextDelta(0, "x")))  # no finish: "stop"
    (span,) = spans.all()
    assert span.attributes is not None
    assert "gen_ai.output.messages" not in span.attributes
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert "gen_ai.usage.input_tokens" not in span.attributes
