"""Frozen slotted dataclasses made for a fraction of what ``dataclasses`` spends.

``@dataclass(frozen=True, slots=True)`` compiles six functions from source for each
class (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``,
``__delattr__``), a compile each: with the records a ``dsh run`` imports, that is a good
part of dsh's own start-up (issue 31). :func:`record` makes the same kind of class, a
real dataclass (``dataclasses.fields``, ``replace``, ``asdict`` and pickling work, and a
dataclass subclass of it must be frozen too), compiling only its ``__init__``; the other
methods are small functions over the field names, made without compiling anything.

:func:`fast_init` is that ``__init__``: it sets each slot through its own descriptor,
about twice as fast as the ``object.__setattr__`` a frozen dataclass's ``__init__`` calls.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, dataclass
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["fast_init", "record"]

_T = TypeVar("_T")


def fast_init(cls: type[_T]) -> type[_T]:
    """Give the slotted dataclass ``cls`` an ``__init__`` that sets its slots directly
    (its fields: positional or keyword, plain defaults; ``init=False`` fields take their
    default; then ``__post_init__`` when the class has one). Returns ``cls``."""
    namespace: dict[str, Any] = {}
    params: list[str] = []
    lines: list[str] = []
    annotations: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # a dataclass
        # Only what the records use: no factories, no keyword-only fields.
        assert f.default_factory is MISSING, (cls, f.name)
        assert not f.kw_only, (cls, f.name)
        namespace[f"_set_{f.name}"] = getattr(cls, f.name).__set__  # the slot's descriptor
        if f.default is not MISSING:
            namespace[f"_default_{f.name}"] = f.default
        if not f.init:
            value = f"_default_{f.name}"
        else:
            value = f.name
            annotations[f.name] = f.type
            has_default = f.default is not MISSING
            params.append(f"{f.name}=_default_{f.name}" if has_default else f.name)
        lines.append(f"    _set_{f.name}(self, {value})\n")
    if hasattr(cls, "__post_init__"):
        lines.append("    self.__post_init__()\n")
    source = f"def __init__(self, {', '.join(params)}):\n{''.join(lines)}"
    exec(source, namespace)  # field names only: identifiers
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {**annotations, "return": None}
    cls.__init__ = init  # type: ignore[method-assign]  # the signature dataclasses gives
    return cls


@overload
def record(cls: type[_T], /) -> type[_T]: ...
@overload
def record(*, eq: bool = True) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[_T] | None = None, /, *, eq: bool = True) -> Any:
    """``@dataclass(frozen=True, slots=True, eq=eq)``, made cheaply (see the module).

    Its fields take no ``default_factory``, are not keyword-only, and are all shown,
    compared and hashed (``field(init=False)`` with a default is fine). What the class
    defines itself (``__repr__``, ``__eq__``, ``__hash__``) it keeps, as with
    ``dataclasses``; with ``eq`` false it compares (and hashes) as what it inherits."""
    if cls is None:
        return functools.partial(_make, eq=eq)
    return _make(cls, eq=eq)


def _make(cls: type[_T], *, eq: bool) -> type[_T]:
    # Unfrozen, nothing is compiled; a subclass of a dataclass is made frozen, as
    # ``dataclasses`` requires of a frozen one's subclass (two functions compiled).
    frozen = any(dataclasses.is_dataclass(base) for base in cls.__mro__[1:])
    make = dataclass(slots=True, init=False, repr=False, eq=False, frozen=frozen)
    made: Any = make(cls)
    fields = dataclasses.fields(made)
    # Every field shown, compared and hashed: what the shared methods assume.
    assert all(f.repr and f.compare and f.hash is None for f in fields), cls
    names = tuple(f.name for f in fields)
    # One call that runs no Python: all the values (a tuple even of one field).
    values = operator.attrgetter(*names) if len(names) > 1 else _one(names)
    methods: dict[str, Any] = {
        "__repr__": _repr_of(names),
        "__setattr__": _refuse_assignment,
        "__delattr__": _refuse_deletion,
        "__getstate__": _getstate_of(values),
        "__setstate__": _setstate_of(names),
    }
    if eq:
        methods["__eq__"] = _eq_of(values)
        methods["__hash__"] = _hash_of(values)
    own = cls.__dict__
    for name, method in methods.items():
        if name not in own or (name == "__hash__" and own[name] is None):
            setattr(made, name, method)
    made.__dataclass_params__ = _params(eq)
    return fast_init(made)  # cls, remade with slots


def _one(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    (name,) = names
    get = operator.attrgetter(name)
    return lambda self: (get(self),)


def _repr_of(names: tuple[str, ...]) -> Callable[[object], str]:
    def __repr__(self: object) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({shown})"

    return __repr__


def _eq_of(values: Callable[[object], Any]) -> Callable[[object, object], Any]:
    def __eq__(self: object, other: object) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash_of(values: Callable[[object], Any]) -> Callable[[object], int]:
    def __hash__(self: object) -> int:
        return hash(values(self))

    return __hash__


def _getstate_of(values: Callable[[object], tuple[Any, ...]]) -> Callable[[object], Any]:
    def __getstate__(self: object) -> tuple[Any, ...]:
        return values(self)

    return __getstate__


def _setstate_of(names: tuple[str, ...]) -> Callable[[object, tuple[Any, ...]], None]:
    def __setstate__(self: object, state: tuple[Any, ...]) -> None:
        for name, value in zip(names, state, strict=True):
            object.__setattr__(self, name, value)

    return __setstate__


def _refuse_assignment(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_deletion(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


@functools.cache
def _params(eq: bool) -> Any:
    """The ``__dataclass_params__`` of ``@dataclass(frozen=True, eq=eq)``, taken from
    such a class (its type is private to ``dataclasses``), made once."""

    class Frozen:
        """Only its parameters are used."""

    made = dataclass(frozen=True)(Frozen) if eq else dataclass(frozen=True, eq=False)(Frozen)
    return made.__dataclass_params__  # type: ignore[attr-defined]  # set by dataclass
