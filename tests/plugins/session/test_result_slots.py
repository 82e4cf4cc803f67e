"""A ``tool/result``'s history message, read from the slots of a compact event in one
call, or from the data of an event that keeps none (the same message either way)."""

from __future__ import annotations

from typing import Any

import pytest

import dsh_llm as llm
from dsh_session import SessionEvent, message_of
from tests.plugins.session.session_support import fresh

_RESULT = {"turn": 1, "step": 1, "call_id": "c1", "name": "echo", "content": "hi"}


@pytest.mark.parametrize(
    "extra",
    [
        {"is_error": False},
        {"is_error": True, "code": "E"},
        # Keys of no compact shape: a plain event, read through its data.
        {"is_error": True, "code": "E", "arguments": {"text": "hi"}},
    ],
)
def test_a_tool_result_contributes_its_block_whatever_keeps_its_data(
    extra: dict[str, Any],
) -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    event = session.append("tool/result", {**_RESULT, **extra})
    expected = llm.Message("tool", (llm.ToolResultBlock("c1", "hi", extra["is_error"]),))
    assert session.history() == (expected,)
    assert message_of(event) == expected
    # The same data as a plain event contributes the same message.
    plain = SessionEvent(event.seq, event.type, event.time, dict(event.data))
    assert message_of(plain) == expected
