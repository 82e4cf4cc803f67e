"""The history read from compact events' slots (RFC 0054): what a session made of
another's events derives, and the message a message event keeps."""

from __future__ import annotations

import pytest

import dsh_llm as llm
from dsh_session import Session, SessionEvent, SessionHeader, message_of
from tests.plugins.session.session_support import fresh


def _turns(session: Session, turns: int, *, hand_over: bool) -> None:
    for turn in range(1, turns + 1):
        question = llm.Message.user(f"q{turn}")
        answer = llm.Message("assistant", (llm.TextBlock(f"a{turn}"),))
        session.append("turn/start", {"turn": turn})
        for kind, message in (("user/message", question), ("assistant/message", answer)):
            data = {"turn": turn, "step": 1, "message": message.to_json()}
            session.append(kind, data, message=message if hand_over else None)
        result = {"call_id": "c", "name": "n", "content": "r", "is_error": False}
        session.append("tool/result", {"turn": turn, "step": 1, **result})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


@pytest.mark.parametrize("hand_over", [True, False])
def test_a_session_made_of_another_s_compact_events_derives_the_same_history(
    hand_over: bool,
) -> None:
    first = fresh()
    _turns(first, 3, hand_over=hand_over)
    again = Session(SessionHeader("again", 0.0), list(first.events))
    assert again.history() == first.history()
    assert [m.role for m in again.history()] == ["user", "assistant", "tool"] * 3
    assert again.last_turn() == 3
    assert again.turn_end(2) == {"kind": "completed"}


def test_the_history_takes_the_message_a_message_event_keeps() -> None:
    session = fresh()
    _turns(session, 2, hand_over=True)
    history = session.history()
    kept = [e for e in session.events if e.type.endswith("/message")]
    messages = [*history[:2], *history[3:5]]  # not the tool results
    assert all(message_of(e) is m for e, m in zip(kept, messages, strict=True))
    # Made again from the same events, the history takes the very same messages.
    again = Session(SessionHeader("again", 0.0), list(session.events))
    assert again.history()[0] is history[0]


def test_a_message_event_without_a_message_fails_the_history() -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    session.append("user/message", {"turn": 1, "step": 1})
    with pytest.raises(KeyError):
        session.history()


@pytest.mark.parametrize("extra", [{}, {"note": "not a built-in shape"}])
def test_a_message_handed_over_in_place_of_its_encoding_is_encoded(extra: dict[str, str]) -> None:
    session = fresh()
    message = llm.Message.user("hello")
    data = {"turn": 1, "step": 1, "message": message, **extra}
    event = session.append("user/message", data, message=message)
    assert event.data == {"turn": 1, "step": 1, "message": message.to_json(), **extra}
    assert session.history() == (message,)
    assert SessionEvent.from_json(event.to_json()) == event
