"""Checking the JSON forms of the model-call vocabulary, and writing them.

A decoder states the keys it requires and allows with a check each; :func:`_record`
reports every wrong key at once as one :class:`LlmFormatError`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeAlias

from dsh import DshError

__all__ = ["LlmFormatError"]


class LlmFormatError(DshError, ValueError):
    """A block, chunk, message, usage or failure is malformed (in its JSON form, or a
    ``Finish`` whose reason and failure disagree)."""

    code = "LLM_FORMAT"


# -- decoding helpers ---------------------------------------------------------------------

_Check: TypeAlias = tuple[Callable[[object], bool], str]

_STR: _Check = (lambda v: isinstance(v, str), "a string")
_BOOL: _Check = (lambda v: isinstance(v, bool), "a boolean")
_COUNT: _Check = (lambda v: type(v) is int and v >= 0, "a non-negative integer")
_INT: _Check = (lambda v: type(v) is int, "an integer")
_OBJECT: _Check = (lambda v: isinstance(v, Mapping), "a JSON object")
_LIST: _Check = (lambda v: isinstance(v, list), "a JSON array")


def _one_of(values: tuple[str, ...]) -> _Check:
    return (lambda v: v in values, "one of " + ", ".join(f'"{v}"' for v in values))


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return repr(value)


def _record(
    data: object,
    what: str,
    required: Mapping[str, _Check],
    optional: Mapping[str, _Check],
    *,
    typed: bool = False,
) -> dict[str, Any]:
    """Check the keys and value types of one JSON object; return its non-null fields
    (without ``type`` when ``typed``: the caller has already dispatched on it)."""
    if not isinstance(data, Mapping):
        raise LlmFormatError(f"{what} must be a JSON object, got {_describe(data)}")
    problems = [f'missing key "{key}"' for key in required if key not in data]
    fields: dict[str, Any] = {}
    for key, value in data.items():
        if typed and key == "type":
            continue
        check = required.get(key) or optional.get(key)
        if check is None:
            problems.append(f'unknown key "{key}"')
        elif value is None and key in optional:
            continue
        elif not check[0](value):
            problems.append(f'"{key}" must be {check[1]}, got {_describe(value)}')
        else:
            fields[key] = value
    if problems:
        raise LlmFormatError(f"{what}: {'; '.join(problems)}")
    return fields


def _kind(data: object, what: str, kinds: tuple[str, ...]) -> str:
    """The ``type`` of a block or chunk object, checked against ``kinds``."""
    if not isinstance(data, Mapping):
        raise LlmFormatError(f"a {what} must be a JSON object, got {_describe(data)}")
    kind = data.get("type")
    if kind not in kinds:
        known = ", ".join(f'"{k}"' for k in kinds)
        got = 'no "type" key' if "type" not in data else f"type {_describe(kind)}"
        raise LlmFormatError(f"unknown {what} type: {got} (expected one of {known})")
    result: str = kind
    return result


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


#: Per slotted class, its slot names and one getter of all their values.
_GETTERS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}


def _getter(kind: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    names: tuple[str, ...] = tuple(kind.__slots__)  # type: ignore[attr-defined]  # slotted
    # The first name once more: a tuple even for one slot (zip stops at the names).
    found = _GETTERS[kind] = (names, operator.attrgetter(*names, names[0]))
    return found


def _compact(obj: Any) -> dict[str, Any]:
    """``obj``'s slots that are not None, in order (every value read in one call)."""
    try:
        names, get = _GETTERS[obj.__class__]
    except KeyError:
        names, get = _getter(obj.__class__)
    values = get(obj)
    if None not in values:  # every slot set (most blocks): no comprehension to run
        return dict(zip(names, values, strict=False))
    return {name: value for name, value in zip(names, values, strict=False) if value is not None}


class _Record:
    """A flat record whose JSON form is its non-null fields: a subclass names its
    ``_WHAT`` and the checks of its required and optional keys."""

    __slots__ = ()
    _WHAT: ClassVar[str]
    _REQUIRED: ClassVar[Mapping[str, _Check]]
    _OPTIONAL: ClassVar[Mapping[str, _Check]]

    def to_json(self) -> dict[str, Any]:
        return _compact(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild the record from :meth:`to_json` output; raises :class:`LlmFormatError`."""
        return cls(**_record(data, cls._WHAT, cls._REQUIRED, cls._OPTIONAL))
