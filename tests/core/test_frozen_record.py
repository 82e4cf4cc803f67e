"""``dsh._record.record`` makes what ``@dataclass(frozen=True, slots=True)`` makes,
compiling only the ``__init__`` (issue 31)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh._record import record


def _body() -> Any:
    class Item:
        """An item."""

        name: str
        count: int = 0
        kind: str = field(default="item", init=False)

    return Item


Made = record(_body())
Plain = dataclass(frozen=True, slots=True)(_body())


@record
class Pair:
    """Two fields, one defaulted."""

    left: int
    right: str = "r"


@record
class Single:
    """One field."""

    value: int


@record(eq=False)
class ByIdentity:
    """Compared as objects are."""

    value: int


@record
class OwnMethods:  # noqa: PLW1641  # the record gives it a __hash__: the point
    """Keeps the methods it defines."""

    value: int

    def __repr__(self) -> str:
        return "own"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OwnMethods)


@record(eq=False)
class Event:
    """A base with its own equality."""

    seq: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and self.seq == other.seq

    def __hash__(self) -> int:
        return self.seq


@record(eq=False)
class Marked(Event):
    """A record subclass of a record: no fields of its own."""


def test_a_record_is_made_as_its_dataclass_is() -> None:
    assert str(inspect.signature(Made)) == str(inspect.signature(Plain))
    assert Made.__init__.__qualname__ == Plain.__init__.__qualname__
    assert Made.__init__.__annotations__ == Plain.__init__.__annotations__
    assert Made.__match_args__ == Plain.__match_args__ == ("name", "count")
    assert Made.__slots__ == Plain.__slots__
    assert Made.__dataclass_params__.frozen
    for args, kwargs in [(("a",), {}), (("a", 2), {}), ((), {"name": "a", "count": 3})]:
        made, plain = Made(*args, **kwargs), Plain(*args, **kwargs)
        assert repr(made) == repr(plain).replace(Plain.__qualname__, Made.__qualname__)
        assert dataclasses.astuple(made) == dataclasses.astuple(plain)
        assert dataclasses.asdict(made) == dataclasses.asdict(plain)
    with pytest.raises(TypeError):
        Made()
    with pytest.raises(TypeError):
        Made("a", kind="x")


def test_a_record_compares_hashes_copies_and_refuses_changes() -> None:
    item = Made("a", 2)
    assert item == Made("a", 2) != Made("b", 2)
    assert item != Plain("a", 2)  # another class, as with dataclasses
    assert hash(item) == hash(Made("a", 2))
    assert dataclasses.replace(item, count=5) == Made("a", 5)
    pair = Pair(1)
    assert pickle.loads(pickle.dumps(pair)) == pair
    assert copy.deepcopy(pair) == pair == copy.copy(pair)
    single = Single(3)
    assert pickle.loads(pickle.dumps(single)) == single
    assert hash(single) == hash(Single(3))
    assert single != Single(4)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'count'"):
        item.count = 3
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'name'"):
        del item.name


def test_a_record_without_eq_compares_as_what_it_inherits() -> None:
    first = ByIdentity(1)
    assert [first].count(first) == 1
    assert first != ByIdentity(1)
    assert not ByIdentity.__dataclass_params__.eq  # type: ignore[attr-defined]  # set at run time
    assert Marked(1) == Event(1)
    assert hash(Marked(2)) == 2
    assert repr(Marked(1)) == "Marked(seq=1)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Marked(1).seq = 2  # type: ignore[misc]  # frozen: the point


def test_a_record_keeps_the_methods_it_defines() -> None:
    assert repr(OwnMethods(1)) == "own"
    assert OwnMethods(1) == OwnMethods(2)
    # Defining __eq__ blanks __hash__; the record hashes by its fields, as dataclasses do.
    assert hash(OwnMethods(1)) == hash(OwnMethods(1))


def test_a_dataclass_subclass_of_a_record_must_be_frozen_too() -> None:
    @dataclass(frozen=True)
    class Counted(Single):
        extra: int = 1

    assert Counted(1) == Counted(1)
    assert Counted(1).extra == 1
    with pytest.raises(TypeError, match="non-frozen"):

        @dataclass
        class Loose(Single):  # type: ignore[misc]  # refused: the point
            extra: int = 1


def test_a_record_s_post_init_runs_after_its_fields_are_set() -> None:
    seen: list[int] = []

    @record
    class Checked:
        """Checked when made."""

        value: int

        def __post_init__(self) -> None:
            seen.append(self.value)

    Checked(4)
    assert seen == [4]
