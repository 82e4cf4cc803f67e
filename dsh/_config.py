"""Validating a plugin's config against its pydantic ``Config`` model."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping, Sequence
from numbers import Number
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from ._errors import ConfigError

__all__ = ["EntryInfo", "validate_config"]


class EntryInfo(Protocol):
    """Where a plugin came from, when a deployment file started it."""

    @property
    def where(self) -> str:
        """``"<file>:<line>: entry '<id>'"``."""

    def locate(self, loc: Sequence[str | int]) -> str:
        """``"<file>:<line>"`` of the config value at ``loc``."""


def validate_config(
    model: type[BaseModel] | None, raw: Any, plugin: str, entry: EntryInfo | None
) -> Any:
    """Return the validated config (``raw`` itself when there is no model).

    Unknown keys are errors at every nesting level, unless a model says
    ``extra="allow"`` for itself. Numbers and booleans are kept apart: a boolean
    where a number is expected (``timeout_ms: true``) is an error, and so is a number
    where a boolean is expected (``enabled: 1``), at any level, whatever the model's
    coercion would have made of it; a float must be finite (no ``.inf``, ``.nan``).
    Strings are still converted (``"10"`` for an ``int``, ``"true"`` for a ``bool``):
    ``!env`` values are strings.
    """
    if model is None:
        return raw
    data = {} if raw is None else raw
    problems: list[tuple[tuple[str | int, ...], str]] = []
    value: BaseModel | None = None
    try:
        value = model.model_validate(data)
    except ValidationError as exc:
        problems = [(tuple(e["loc"]), e["msg"]) for e in exc.errors(include_url=False)]
    else:
        _compare(value, data, (), problems)
    if problems:
        where = f" ({entry.where})" if entry is not None else ""
        lines = [f'invalid config for plugin "{plugin}"{where}:']
        for loc, msg in problems:
            at = ".".join(str(part) for part in loc) or "<config>"
            prefix = f"{entry.locate(loc)}: " if entry is not None else ""
            hint = _did_you_mean(model, loc) if msg == _EXTRA else ""
            lines.append(f"  - {prefix}{msg} (at {at}){hint}")
        raise ConfigError("\n".join(lines))
    return value


_EXTRA = "Extra inputs are not permitted"
_NOT_A_NUMBER = "Input should be a valid number, not a boolean"
_NOT_A_BOOL = "Input should be a valid boolean, not a number"
_NOT_FINITE = "Input should be a finite number"


def _normal(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def _did_you_mean(model: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    """``; did you mean "tool_order"?`` for an unknown key close to a known one."""
    known = _keys_at(model, loc[:-1])
    key = loc[-1] if loc else None
    if not known or not isinstance(key, str):
        return ""
    close = [name for name in known if _normal(name) == _normal(key)]
    if not close:
        import difflib  # only an error's message needs it (docs/rfc/0050)

        close = difflib.get_close_matches(key, known, n=1)
    return f'; did you mean "{close[0]}"?' if close else ""


def _keys_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The field names of the model found by following ``loc`` from ``model``."""
    annotation: Any = model
    for step in loc:
        annotation = _inner(annotation, step)
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return list(option.model_fields)
    return []


def _options(annotation: Any) -> tuple[Any, ...]:
    """The members of a union (``X | None``), else the annotation alone."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _inner(annotation: Any, step: str | int) -> Any:
    """The type one ``loc`` step below ``annotation`` (None when it cannot be told)."""
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, BaseModel):
            field = option.model_fields.get(str(step))
            if field is not None:
                return field.annotation
        origin = typing.get_origin(option)
        args = typing.get_args(option)
        if origin in (list, tuple, set, frozenset) and args and isinstance(step, int):
            return args[0]
        if origin is dict and len(args) == 2:
            return args[1]
    return None


def _mismatch(value: object, raw: object) -> str | None:
    """The problem when validation turned the boolean ``raw`` into a number or the
    number ``raw`` into a boolean (``bool`` is an ``int`` to Python and to pydantic),
    or made an infinite or not-a-number float (``.inf``, ``"nan"``)."""
    if isinstance(raw, bool):
        return None if isinstance(value, bool) or not isinstance(value, Number) else _NOT_A_NUMBER
    if isinstance(value, bool):
        return _NOT_A_BOOL if isinstance(raw, Number) else None
    if isinstance(value, float) and not math.isfinite(value):
        return _NOT_FINITE
    return None


def _compare(
    value: object,
    raw: object,
    loc: tuple[str | int, ...],
    out: list[tuple[tuple[str | int, ...], str]],
) -> None:
    """Report, walking the validated ``value`` beside the ``raw`` input, what validation
    let through but a config must not hold: keys of ``raw`` that a model which did not
    opt into extras ignored, a boolean or number coerced into the other, and a float
    that is not finite."""
    problem = _mismatch(value, raw)
    if problem is not None:
        out.append((loc, problem))
    elif isinstance(value, BaseModel) and isinstance(raw, Mapping):
        fields = type(value).model_fields
        if type(value).model_config.get("extra") is None:
            known = set(fields)
            known.update(f.alias for f in fields.values() if f.alias)
            out.extend(((*loc, key), _EXTRA) for key in raw if key not in known)
        for name, field in fields.items():
            key = field.alias if field.alias and field.alias in raw else name
            if key in raw:
                _compare(getattr(value, name), raw[key], (*loc, key), out)
    elif isinstance(value, Mapping) and isinstance(raw, Mapping):
        # Pair by position: validation may coerce the keys ("1" -> 1) but keeps the order.
        for (raw_key, raw_item), (key, item) in zip(raw.items(), value.items(), strict=False):
            mismatch = _mismatch(key, raw_key)
            if mismatch is not None:
                out.append(((*loc, raw_key), mismatch))
            _compare(item, raw_item, (*loc, raw_key), out)
    elif (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and isinstance(raw, Sequence)
        and not isinstance(raw, str)
    ):
        for i, (item, raw_item) in enumerate(zip(value, raw, strict=False)):
            _compare(item, raw_item, (*loc, i), out)
