"""Events whose data is kept as slots, not as the dict it was given in (RFC 0054).

A turn logs a few events of fixed shapes (``{"turn", "step"}``, ``{"turn", "step",
"message", "usage"}``, ...): their dicts cost more than the event itself. An event
appended with a plain ``dict`` of one of the shapes of :data:`_SHAPES` keeps its
values in the slots of a class made for that shape instead, and builds the same dict
each time ``data`` is read: equal, with its keys in the same order, its values the
very objects given. A ``user/message`` or ``assistant/message`` appended with the
:class:`~dsh_llm.Message` its ``data["message"]`` encodes keeps that message instead
of the encoding, and ``data["message"]`` is its ``to_json()``.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Mapping
from dataclasses import FrozenInstanceError
from typing import Any, ClassVar

from dsh_llm import Message

from ._event import SessionEvent

__all__ = ["BUILDERS", "RESULT_FIELDS", "plain_event", "session_event"]

#: The data shapes kept as slots: the keys, in order, of the built-in event types'
#: data (and of the agent loop's ``usage/step``).
_SHAPES: tuple[tuple[str, ...], ...] = (
    ("turn",),
    ("turn", "step"),
    ("turn", "reason"),
    ("turn", "step", "message"),
    ("turn", "step", "message", "usage"),
    ("turn", "step", "message", "interrupted"),
    ("turn", "step", "header"),
    ("turn", "step", "usage"),
    ("turn", "step", "usage", "estimated"),
    ("turn", "step", "call_id", "name", "arguments"),
    ("turn", "step", "call_id", "name", "content", "is_error"),
    ("turn", "step", "call_id", "name", "content", "is_error", "code"),
)

#: A ``tool/result`` event's ``call_id``, ``content`` and ``is_error`` read from its
#: slots in one call that runs no Python; AttributeError for an event of no shape that
#: keeps them (a plain one, say).
RESULT_FIELDS: Callable[[SessionEvent], tuple[Any, Any, Any]] = operator.attrgetter(
    "_call_id", "_content", "_is_error"
)

#: The types whose ``message=`` may stand for ``data["message"]``.
_MESSAGE_TYPES = frozenset({"user/message", "assistant/message"})


class _Compact(SessionEvent):
    """A :class:`SessionEvent` whose data values are slots of a class per shape; it
    reads, compares, copies and pickles as the plain event it stands for."""

    __slots__ = ()
    _keys: ClassVar[tuple[str, ...]]
    #: All the slots' values in one call (a tuple even for one slot).
    _values: ClassVar[operator.attrgetter[tuple[Any, ...]]]
    #: The slot of each key.
    _slots: ClassVar[dict[str, Any]]

    def __new__(cls, seq: int, type: str, time: float, data: Mapping[str, Any]) -> Any:
        # What dataclasses.replace calls: the event of the new fields, compact or not.
        return session_event(seq, type, time, data)

    def __init__(self, *args: object, **kwargs: object) -> None:
        """Built by :func:`session_event` (through ``__new__``)."""

    @property
    def data(self) -> dict[str, Any]:
        return dict(zip(self._keys, self._values(self), strict=False))

    def _value(self, key: str) -> Any:
        return self._slots[key].__get__(self)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[type[SessionEvent], tuple[int, str, float, dict[str, Any]]]:
        return SessionEvent, (self.seq, self.type, self.time, self.data)

    def __repr__(self) -> str:
        return repr(SessionEvent(self.seq, self.type, self.time, self.data))


class _CompactMessage(_Compact):
    """A compact event keeping the ``Message`` its ``data["message"]`` encodes."""

    __slots__ = ()

    @property
    def data(self) -> dict[str, Any]:
        data = dict(zip(self._keys, self._values(self), strict=False))
        data["message"] = data["message"].to_json()
        return data

    #: The slot each shape of this base has (they all hold a ``message``).
    _message: Message

    def _kept_message(self) -> Message:
        return self._message


#: What every builder sets: the allocator and the setters of the inherited fields.
_FIELD_SETTERS = {
    "_new": object.__new__,
    **{f"_{name}": SessionEvent.__dict__[name].__set__ for name in ("seq", "type", "time")},
}


def _shape_class(keys: tuple[str, ...], base: type[_Compact]) -> type[_Compact]:
    slots = tuple(f"_{key}" for key in keys)
    namespace = {
        "__slots__": slots,
        "_keys": keys,
        # The first slot once more: a tuple even for one slot (zip stops at the keys).
        "_values": operator.attrgetter(*slots, slots[0]),
    }
    kind: type[_Compact] = builtins.type(f"{base.__name__}_{'_'.join(keys)}", (base,), namespace)
    kind._slots = {key: kind.__dict__[slot] for key, slot in zip(keys, slots, strict=True)}
    if "message" in keys and base is _Compact:  # its message decoded from the slot itself
        kind._kept_message = _decoder(kind._slots["message"].__get__)  # type: ignore[method-assign,assignment]
    return kind


def _decoder(get: Callable[[_Compact], Any]) -> Callable[[_Compact], Message]:
    def kept_message(self: _Compact) -> Message:
        return Message.from_json(get(self))

    return kept_message


def _body(
    kind: type[_Compact], keys: tuple[str, ...], namespace: dict[str, Any], indent: str
) -> str:
    """The lines that build and return an event of ``kind``, each value set by its
    slot's setter (``namespace`` gets the class and the setters)."""
    name = f"_{kind.__name__}"
    namespace[name] = kind
    keep = issubclass(kind, _CompactMessage)
    lines = [
        f"event = _new({name})",
        "_seq(event, seq)",
        "_type(event, type)",
        "_time(event, time)",
    ]
    for i, key in enumerate(keys):
        namespace[f"{name}_{i}"] = kind.__dict__[f"_{key}"].__set__
        value = "message" if keep and key == "message" else f"data[{key!r}]"
        lines.append(f"{name}_{i}(event, {value})")
    lines.append("return event")
    return "".join(f"{indent}{line}\n" for line in lines)


def _builder(keys: tuple[str, ...]) -> Callable[..., SessionEvent]:
    """``build(seq, type, time, data, message)`` for data of shape ``keys``: one line
    per value, as ``dataclasses`` makes ``__init__`` (a loop over the slots would take
    twice as long as building a plain event; this takes about as long). A shape with a
    ``message`` keeps the given ``Message`` for a message type."""
    namespace: dict[str, Any] = {**_FIELD_SETTERS, "_MESSAGE_TYPES": _MESSAGE_TYPES}
    source = "def build(seq, type, time, data, message):\n"
    if "message" in keys:
        source += "    if message is not None and type in _MESSAGE_TYPES:\n"
        source += _body(_shape_class(keys, _CompactMessage), keys, namespace, " " * 8)
    source += _body(_shape_class(keys, _Compact), keys, namespace, " " * 4)
    exec(source, namespace)  # keys from _SHAPES only: fixed identifiers
    build: Callable[..., SessionEvent] = namespace["build"]
    return build


def plain_event(
    seq: int, type: str, time: float, data: Mapping[str, Any], message: Message | None = None
) -> SessionEvent:
    """The builder of any other data: kept as given (but for a ``message`` given in
    place of its encoding, which is encoded)."""
    if type in _MESSAGE_TYPES and data.get("message") is message and message is not None:
        data = {**data, "message": message.to_json()}
    return SessionEvent(seq, type, time, data)


class _Builders(dict[tuple[str, ...], Callable[..., SessionEvent]]):
    """The builder of each shape, made when its first event is (a run meets a few of
    the shapes: making them all would add to every start-up); :func:`plain_event` for
    any other key set. No call on a hit."""

    def __missing__(self, keys: tuple[str, ...]) -> Callable[..., SessionEvent]:
        if keys not in _KNOWN:
            return plain_event
        build = self[keys] = _builder(keys)
        return build


_KNOWN = frozenset(_SHAPES)
#: The builder of each shape's events, by the data's keys in order.
BUILDERS = _Builders()


def session_event(
    seq: int, type: str, time: float, data: Mapping[str, Any], message: Message | None = None
) -> SessionEvent:
    """The event ``SessionEvent(seq, type, time, data)``, compact when ``data`` is a
    ``dict`` of a known shape; ``message``: the :class:`~dsh_llm.Message` that
    ``data["message"]`` encodes, kept instead of it for a message type."""
    build = BUILDERS[tuple(data)] if builtins.type(data) is dict else plain_event
    return build(seq, type, time, data, message)
