"""A tool call's arguments checked against the tool: its argument names, then its model.

Every tool refuses an argument it does not take, whatever its pydantic model's
``extra`` setting, unless it says it takes any: a model with ``extra="allow"`` (or a
root model, whose type decides), or a forwarded JSON Schema (``Tool.json_schema``)
that does not set ``additionalProperties: false``. Nested objects follow their own
model's ``extra``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import AliasChoices, AliasPath, BaseModel, RootModel, ValidationError
from pydantic_core import from_json

from ._errors import ToolArgumentsError

__all__ = ["ArgumentNames", "argument_names", "shown_schema", "validate_arguments"]


@dataclass(frozen=True, slots=True)
class ArgumentNames:
    """The top-level argument names a tool takes."""

    #: The names a call may use (fields and their aliases); None: any name.
    accepted: frozenset[str] | None
    #: The names the model is shown, listed when a call uses another.
    shown: tuple[str, ...]


def _alias_names(alias: str | AliasPath | AliasChoices | None) -> Iterator[str]:
    if isinstance(alias, str):
        yield alias
    elif isinstance(alias, AliasPath):
        yield str(alias.path[0])  # a path starts with a name
    elif isinstance(alias, AliasChoices):
        for choice in alias.choices:
            yield from _alias_names(choice)


def _field_names(model: type[BaseModel]) -> Iterator[str]:
    """The names ``model`` validates its fields from: each field's alias (its
    validation alias first), and its own name when it has none or the model takes
    names too."""
    config = model.model_config
    by_name = bool(config.get("validate_by_name") or config.get("populate_by_name"))
    by_alias = config.get("validate_by_alias", True)
    for name, field in model.model_fields.items():
        alias = field.alias if field.validation_alias is None else field.validation_alias
        if alias is None or by_name:
            yield name
        if by_alias:
            yield from _alias_names(alias)


def argument_names(
    parameters: type[BaseModel], schema: Mapping[str, Any], *, forwarded: bool
) -> ArgumentNames:
    """What a tool with the model ``parameters`` and the schema ``schema`` takes:
    ``forwarded`` when the schema is the tool's own ``json_schema`` (it decides), else
    the model's ``extra`` does."""
    properties = schema.get("properties")
    shown = tuple(properties) if isinstance(properties, Mapping) else ()
    if forwarded:
        closed = schema.get("additionalProperties") is False
        return ArgumentNames(frozenset(shown) if closed else None, shown)
    if parameters.model_config.get("extra") == "allow" or issubclass(parameters, RootModel):
        return ArgumentNames(None, shown)
    return ArgumentNames(frozenset({*shown, *_field_names(parameters)}), shown)


def shown_schema(schema: Mapping[str, Any], names: ArgumentNames) -> dict[str, Any]:
    """``schema`` as the model is shown it: an object schema of a tool that refuses
    other names says so (``additionalProperties: false``) when it does not already."""
    shown = dict(schema)
    if names.accepted is not None and shown.get("type") == "object":
        shown.setdefault("additionalProperties", False)
    return shown


#: ``BaseModel.model_validate_json`` itself, to tell a model that has its own.
_VALIDATE_JSON = BaseModel.model_validate_json.__func__  # type: ignore[attr-defined]


def _location(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _unknown(tool: str, names: ArgumentNames, unknown: list[str]) -> str:
    plural = "s" if len(unknown) > 1 else ""
    listed = ", ".join(f'"{name}"' for name in unknown)
    takes = f"takes: {', '.join(names.shown)}" if names.shown else "takes no arguments"
    return f"unknown argument{plural} {listed} ({tool} {takes})"


def _problems(exc: ValidationError, unknown: list[str]) -> list[str]:
    """The problems of a failed validation; ``unknown`` gains the top-level names the
    model itself refused (``extra="forbid"``)."""
    problems: list[str] = []
    for error in exc.errors(include_url=False):
        loc = error["loc"]
        if error["type"] != "extra_forbidden":
            where = _location(loc)
            problems.append(f"{where}: {error['msg']}" if where else error["msg"])
        elif len(loc) > 1:
            problems.append(f'{_location(loc[:-1])}: unknown key "{loc[-1]}"')
        elif str(loc[0]) not in unknown:
            unknown.append(str(loc[0]))
    return problems


def validate_arguments(
    tool: str, model: type[BaseModel], names: ArgumentNames, arguments: object
) -> BaseModel:
    """``arguments`` (JSON text, blank meaning ``{}``, or a mapping) validated into
    ``model`` for the tool ``tool``. Raises :class:`ToolArgumentsError` naming every
    problem (names it does not take first, as ``unknown argument "x" (<tool> takes:
    a, b)``); what a validator of the model raises otherwise propagates."""
    text: str | None = None
    mapping: Mapping[Any, Any] = {}
    # A str exactly (the model's text, the usual case) needs no isinstance call.
    if type(arguments) is str or isinstance(arguments, str):
        text = arguments
    elif isinstance(arguments, Mapping):
        mapping = arguments
    else:
        raise ToolArgumentsError(
            f"arguments must be a JSON object string or a dict, got {type(arguments).__name__}"
        )
    accepted = names.accepted
    unknown: list[str] = []
    if accepted is not None:
        # The top-level keys, in their order (none when the arguments are not an
        # object: the model's validation says what is wrong).
        keys: Collection[str] = ()
        if text is None:
            keys = [str(key) for key in mapping]
        else:
            try:
                # One C call (the json module's loads is three Python ones).
                parsed = from_json(text)
            except ValueError:
                pass
            else:
                # A JSON object's keys are strings: the dict itself holds them, in order.
                if type(parsed) is dict:
                    keys = parsed
        if not accepted.issuperset(keys):  # the usual call takes only names it knows
            unknown = [k for k in keys if k not in accepted]
    args: BaseModel | None = None
    problems: list[str] = []
    try:
        if text is None:
            args = model.model_validate(dict(mapping))
        elif text.strip():
            # What ``model_validate_json`` does with its defaults, without its frame,
            # unless the model has its own.
            if model.model_validate_json.__func__ is _VALIDATE_JSON:  # type: ignore[attr-defined]
                args = model.__pydantic_validator__.validate_json(text)
            else:
                args = model.model_validate_json(text)
        else:
            args = model.model_validate({})
    except ValidationError as exc:
        problems = _problems(exc, unknown)
    if unknown:
        problems.insert(0, _unknown(tool, names, unknown))
    if args is None or problems:
        raise ToolArgumentsError("; ".join(problems))
    return args
