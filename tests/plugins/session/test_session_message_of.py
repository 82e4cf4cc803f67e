"""``message_of``: the history message one event contributes."""

from dsh_llm import Message, TextBlock, ToolResultBlock
from dsh_session import SessionEvent, message_of


def _event(type: str, data: dict[str, object]) -> SessionEvent:
    return SessionEvent(0, type, 0.0, data)


def test_message_of_each_event_type() -> None:
    user = Message.user("hi")
    answer = Message("assistant", (TextBlock("yes"),))
    assert message_of(_event("user/message", {"message": user.to_json()})) == user
    assert message_of(_event("assistant/message", {"message": answer.to_json()})) == answer
    empty = Message("assistant", ())
    assert message_of(_event("assistant/message", {"message": empty.to_json()})) is None
    result = {"call_id": "c1", "content": "out", "is_error": False}
    expected = Message("tool", (ToolResultBlock("c1", "out", False),))
    assert message_of(_event("tool/result", result)) == expected
    assert message_of(_event("step/start", {"turn": 1, "step": 1})) is None
