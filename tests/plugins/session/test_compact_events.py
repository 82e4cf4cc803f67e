"""Events of the built-in data shapes kept as slots (RFC 0054): read, compared,
written, copied and pickled as the plain event of the same fields."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from dsh_llm import Message, TextBlock, ToolCallBlock
from dsh_session import SessionEvent
from tests.plugins.session.session_support import fresh

ANSWER = Message("assistant", (TextBlock("hi"), ToolCallBlock("c1", "echo", '{"text": "x"}')))
USAGE = {"input_tokens": 3, "output_tokens": 2}

#: One event of every built-in shape, as the agent loop appends it.
SHAPED: list[tuple[str, dict[str, Any]]] = [
    ("turn/start", {"turn": 1}),
    ("step/start", {"turn": 1, "step": 1}),
    ("step/end", {"turn": 1, "step": 1}),
    ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ("user/message", {"turn": 1, "step": 1, "message": Message.user("hi").to_json()}),
    ("assistant/message", {"turn": 1, "step": 1, "message": ANSWER.to_json(), "usage": USAGE}),
    ("assistant/message", {"turn": 1, "step": 1, "message": ANSWER.to_json(), "interrupted": True}),
    ("request/header", {"turn": 1, "step": 1, "header": {"model": "m", "tools": ["echo"]}}),
    ("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "echo", "arguments": "{}"}),
    (
        "tool/result",
        {"turn": 1, "step": 1, "call_id": "c1", "name": "echo", "content": "x", "is_error": False},
    ),
    (
        "tool/result",
        {
            "turn": 1,
            "step": 1,
            "call_id": "c1",
            "name": "echo",
            "content": "no",
            "is_error": True,
            "code": "TOOL_FAILED",
        },
    ),
]


def _appended(kind: str, data: Mapping[str, Any], message: Message | None = None) -> SessionEvent:
    return fresh().append(kind, data, message=message)


@pytest.mark.parametrize(("kind", "data"), SHAPED)
def test_a_shaped_event_reads_as_given(kind: str, data: dict[str, Any]) -> None:
    event = _appended(kind, data)
    plain = SessionEvent(event.seq, kind, event.time, data)
    assert type(event) is not SessionEvent  # compact
    assert event.data == data
    assert event.data is not data
    assert list(event.data) == list(data)  # the keys in the order given
    assert all(event.data[key] is value for key, value in data.items())  # the very values
    assert event == plain
    assert plain == event
    assert json.dumps(event.to_json()) == json.dumps(plain.to_json())
    assert repr(event) == repr(plain)
    assert SessionEvent.from_json(event.to_json()) == event


def test_a_compact_event_hashes_as_the_plain_one() -> None:
    event = _appended("step/start", {"turn": 1, "step": 2})
    with pytest.raises(TypeError):  # its data is a dict, as the plain event's
        hash(event)


def test_a_compact_event_is_frozen() -> None:
    event = _appended("step/start", {"turn": 1, "step": 2})
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 3  # type: ignore[misc]  # the point: frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        event._turn = 3  # type: ignore[attr-defined]  # a slot is not writable either
    with pytest.raises(dataclasses.FrozenInstanceError):
        del event.seq
    assert event.data == {"turn": 1, "step": 2}


def test_copies_and_pickles_are_plain_events() -> None:
    data = {"turn": 1, "reason": {"kind": "completed"}}
    event = _appended("turn/end", data)
    for other in (copy.copy(event), copy.deepcopy(event), pickle.loads(pickle.dumps(event))):
        assert type(other) is SessionEvent
        assert other == event
        assert other.data == data


def test_replace_makes_the_event_of_the_new_fields() -> None:
    event = _appended("step/start", {"turn": 1, "step": 2})
    moved = dataclasses.replace(event, seq=7)
    assert moved == SessionEvent(7, "step/start", event.time, {"turn": 1, "step": 2})
    assert type(moved) is type(event)
    other = dataclasses.replace(event, data={"anything": 1})
    assert type(other) is SessionEvent
    assert other.data == {"anything": 1}


def test_other_data_is_kept_as_given() -> None:
    session = fresh()
    proxy = MappingProxyType({"turn": 1, "step": 1})
    odd = {"step": 1, "turn": 1}  # a known key set in another order
    for data in (proxy, odd, {"turn": 1, "step": 1, "extra": 0}):
        event = session.append("step/start", data)
        assert type(event) is SessionEvent
        assert event.data is data


def test_a_message_event_keeps_the_message_for_its_encoding() -> None:
    data = {"turn": 1, "step": 1, "message": ANSWER.to_json(), "usage": USAGE}
    event = _appended("assistant/message", data, ANSWER)
    assert event.data == data
    assert list(event.data) == list(data)
    assert event.data["usage"] is USAGE
    assert event.data["message"] is not event.data["message"]  # encoded on each read
    plain = SessionEvent(event.seq, event.type, event.time, data)
    assert event == plain
    assert json.dumps(event.to_json()) == json.dumps(plain.to_json())
    assert repr(event) == repr(plain)
    assert pickle.loads(pickle.dumps(event)) == event
    user = Message.user("hello")
    asked = _appended("user/message", {"turn": 1, "step": 1, "message": user.to_json()}, user)
    encoded = {"role": "user", "content": [{"text": "hello", "type": "text"}]}
    assert asked.data == {"turn": 1, "step": 1, "message": encoded}


def test_a_message_of_another_type_is_not_taken_for_the_data() -> None:
    session = fresh()
    encoded = {"role": "user", "content": []}  # not what the message encodes
    data = {"turn": 1, "step": 1, "message": encoded}
    shaped = session.append("tool/result", dict(SHAPED[9][1]), message=Message.user("x"))
    assert shaped.data == SHAPED[9][1]
    header = session.append("request/header", data, message=Message.user("x"))
    assert header.data["message"] is encoded  # kept as given: not a message type
