"""Validating a plugin's config against its pydantic ``Config`` model."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
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
    ``extra="allow"`` for itself.
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
        _unknown_keys(value, data, (), problems)
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


def _normal(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def _did_you_mean(model: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    """``; did you mean "tool_order"?`` for an unknown key close to a known one."""
    known = _keys_at(model, loc[:-1])
    key = loc[-1] if loc else None
    if not known or not isinstance(key, str):
        return ""
    same = [name for name in known if _normal(name) == _normal(key)]
    close = same or difflib.get_close_matches(key, known, n=1)
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


def _unknown_keys(
    value: object,
    raw: object,
    loc: tuple[str | int, ...],
    out: list[tuple[tuple[str | int, ...], str]],
) -> None:
    """Report keys of ``raw`` that a model which did not opt into extras ignored."""
    if isinstance(value, BaseModel) and isinstance(raw, Mapping):
        fields = type(value).model_fields
        if type(value).model_config.get("extra") is None:
            known = set(fields)
            known.update(f.alias for f in fields.values() if f.alias)
            out.extend(((*loc, key), _EXTRA) for key in raw if key not in known)
        for name, field in fields.items():
            key = field.alias if field.alias and field.alias in raw else name
            if key in raw:
                _unknown_keys(getattr(value, name), raw[key], (*loc, key), out)
    elif isinstance(value, Mapping) and isinstance(raw, Mapping):
        # Pair by position: validation may coerce the keys ("1" -> 1) but keeps the order.
        for (key, raw_item), item in zip(raw.items(), value.values(), strict=False):
            _unknown_keys(item, raw_item, (*loc, key), out)
    elif (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and isinstance(raw, Sequence)
        and not isinstance(raw, str)
    ):
        for i, (item, raw_item) in enumerate(zip(value, raw, strict=False)):
            _unknown_keys(item, raw_item, (*loc, i), out)
