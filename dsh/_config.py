"""Validating a plugin's config against its pydantic ``Config`` model."""

from __future__ import annotations

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
            lines.append(f"  - {prefix}{msg} (at {at})")
        raise ConfigError("\n".join(lines))
    return value


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
            out.extend(
                ((*loc, key), "Extra inputs are not permitted") for key in raw if key not in known
            )
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
