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

__all__ = ["session_event"]

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

#: The types whose ``message=`` may stand for ``data["message"]``.
_MESSAGE_TYPES = frozenset({"user/message", "assistant/message"})


class _Compact(SessionEvent):
    """A :class:`SessionEvent` whose data values are slots of a class per shape; it
    reads, compares, copies and pickles as the plain event it stands for."""

    __slots__ = ()
    _keys: ClassVar[tuple[str, ...]]
    #: All the slots' values in one call (a tuple even for one slot).
    _values: ClassVar[operator.attrgetter[tuple[Any, ...]]]
    #: The class of the same shape that keeps a ``Message`` for ``data["message"]``.
    _with_message: ClassVar[type[_Compact] | None] = None
    #: ``build(seq, type, time, data, message)``, made by :func:`_builder`.
    _build: ClassVar[Callable[..., SessionEvent]]

    def __new__(cls, seq: int, type: str, time: float, data: Mapping[str, Any]) -> Any:
        # What dataclasses.replace calls: the event of the new fields, compact or not.
        return session_event(seq, type, time, data)

    def __init__(self, *args: object, **kwargs: object) -> None:
        """Built by :func:`session_event` (through ``__new__``)."""

    @property
    def data(self) -> dict[str, Any]:
        return dict(zip(self._keys, self._values(self), strict=False))

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
    kind: type[_Compact] = builtins.type(f"{base.__name__}_{len(keys)}", (base,), namespace)
    kind._build = _builder(kind, keys, keep_message=base is _CompactMessage)
    return kind


def _builder(
    kind: type[_Compact], keys: tuple[str, ...], *, keep_message: bool
) -> Callable[..., SessionEvent]:
    """``build(seq, type, time, data, message)``: an event of ``kind``, each value set
    by its slot's setter in one line (a loop over the slots would take twice as long
    as building a plain event; this takes about as long)."""
    setters = {f"_set{i}": kind.__dict__[f"_{key}"].__set__ for i, key in enumerate(keys)}
    values = ["message" if keep_message and key == "message" else f"data[{key!r}]" for key in keys]
    lines = [f"    _set{i}(event, {value})\n" for i, value in enumerate(values)]
    source = (
        "def build(seq, type, time, data, message):\n"
        "    event = _new(_kind)\n"
        "    _seq(event, seq)\n    _type(event, type)\n    _time(event, time)\n"
        f"{''.join(lines)}    return event\n"
    )
    namespace: dict[str, Any] = {**_FIELD_SETTERS, **setters, "_kind": kind}
    exec(source, namespace)  # keys from _SHAPES only: fixed identifiers
    build: Callable[..., SessionEvent] = namespace["build"]
    return build


class _Classes(dict[tuple[str, ...], "type[_Compact] | None"]):
    """The class of each shape; None for any other key set (no call on a hit)."""

    def __missing__(self, keys: tuple[str, ...]) -> None:
        return None


def _classes() -> _Classes:
    classes = _Classes()
    for keys in _SHAPES:
        kind = classes[keys] = _shape_class(keys, _Compact)
        if "message" in keys:
            kind._with_message = _shape_class(keys, _CompactMessage)
    return classes


_CLASSES = _classes()


def session_event(
    seq: int, type: str, time: float, data: Mapping[str, Any], message: Message | None = None
) -> SessionEvent:
    """The event ``SessionEvent(seq, type, time, data)``, compact when ``data`` is a
    ``dict`` of a known shape; ``message``: the :class:`~dsh_llm.Message` that
    ``data["message"]`` encodes, kept instead of it for a message type."""
    kind = _CLASSES[tuple(data)] if builtins.type(data) is dict else None
    if kind is None:
        return SessionEvent(seq, type, time, data)
    keeper = kind._with_message if message is not None and type in _MESSAGE_TYPES else None
    return (kind if keeper is None else keeper)._build(seq, type, time, data, message)
