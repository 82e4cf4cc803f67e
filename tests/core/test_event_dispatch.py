"""Dispatch fast paths: the per-scope listener index and waterfalls with no listener."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import dsh
from dsh import Context

pytestmark = pytest.mark.anyio

Next = Callable[[], Awaitable[Any]]


class Specs:
    @dsh.hookspec
    def tick(self, n: int) -> None:
        """An emitted event."""

    @dsh.hookspec
    def text_build(self, text: str, call_next: Next) -> str:
        """A waterfall."""
        return text


class Key:
    """A scope key; keys are compared by identity, so equal keys are distinct scopes."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key)

    def __hash__(self) -> int:
        return 0


def names(listeners: tuple[Any, ...]) -> list[str]:
    return [listener.fn.__name__ for listener in listeners]


def tagged(heard: list[str], tag: str) -> Callable[[int], None]:
    def listener(n: int) -> None:
        heard.append(tag)

    listener.__name__ = tag
    return listener


async def test_a_scoped_dispatch_merges_global_and_own_listeners_in_registration_order() -> None:
    a, b = Key(), Key()
    heard: list[str] = []
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("tick", tagged(heard, "g1"))
        root.scoped(a).on("tick", tagged(heard, "a1"))
        root.scoped(b).on("tick", tagged(heard, "b1"))
        root.on("tick", tagged(heard, "g2"))
        root.scoped(a).on("tick", tagged(heard, "a0"), prepend=True)
        root.on("tick", tagged(heard, "g0"), prepend=True)
        ev = root.events.event("tick")
        assert names(ev.heard(a)) == ["g0", "a0", "g1", "a1", "g2"]
        assert names(ev.heard(b)) == ["g0", "g1", "b1", "g2"]
        assert names(ev.heard(None)) == ["g0", "g1", "g2"]
        assert names(ev.heard(Key())) == ["g0", "g1", "g2"]  # equal, but another key
        assert names(ev.listeners()) == ["g0", "a0", "g1", "a1", "b1", "g2"]
        root.emit("tick", 1, scope=a)
        assert heard == ["g0", "a0", "g1", "a1", "g2"]


async def test_snapshots_follow_every_change() -> None:
    a = Key()
    heard: list[str] = []
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        ev = root.events.event("tick")
        assert ev.heard(a) == ()
        own = root.scoped(a).on("tick", tagged(heard, "a1"))
        assert names(ev.heard(a)) == ["a1"]
        glob = root.on("tick", tagged(heard, "g1"))  # a global change rebuilds every scope
        assert names(ev.heard(a)) == ["a1", "g1"]
        later = root.scoped(a).on("tick", tagged(heard, "a2"))
        assert names(ev.heard(a)) == ["a1", "g1", "a2"]
        own()
        assert names(ev.heard(a)) == ["g1", "a2"]
        later()  # the scope's last listener: the scope leaves the index
        assert names(ev.heard(a)) == ["g1"]
        assert names(ev.listeners()) == ["g1"]
        glob()
        assert ev.heard(a) == ev.heard(None) == ev.listeners() == ()
        root.emit("tick", 1, scope=a)
        await root.parallel("tick", 1, scope=a)
        assert heard == []


async def test_a_hookimpl_marked_trylast_stays_after_later_listeners_in_a_scope() -> None:
    a = Key()
    heard: list[str] = []

    class Late(dsh.Plugin):
        hookspecs = Specs

        @dsh.hookimpl(trylast=True)
        def tick(self, n: int) -> None:
            heard.append("late")

    async with Context() as root:
        await root.plugin(Late)
        root.scoped(a).on("tick", tagged(heard, "a1"))
        root.on("tick", tagged(heard, "g1"))
        root.emit("tick", 1, scope=a)
        assert heard == ["a1", "g1", "late"]


async def test_many_scopes_each_hear_only_their_own() -> None:
    keys = [Key() for _ in range(50)]
    heard: list[int] = []
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        for i, key in enumerate(keys):
            root.scoped(key).on("tick", lambda n, i=i: heard.append(i))
        for i, key in enumerate(keys):
            root.emit("tick", i, scope=key)
        assert heard == list(range(50))
        ev = root.events.event("tick")
        assert all(len(ev.heard(key)) == 1 for key in keys)


async def test_a_waterfall_with_no_listener_returns_what_inner_returns() -> None:
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        assert await root.waterfall("text/build", "t", inner=lambda: "sync") == "sync"

        async def later() -> str:
            return "async"

        assert await root.waterfall("text/build", "t", inner=later) == "async"
        assert await root.waterfall("text/build", "t") is None
        a = Key()
        root.scoped(Key()).on("text/build", lambda text, call_next: "elsewhere")
        assert await root.waterfall("text/build", "t", inner=lambda: "mine", scope=a) == "mine"


async def test_a_waterfall_whose_listeners_all_pass_on_and_no_inner_gives_none() -> None:
    async with Context() as root:
        root.events.add_hookspecs(Specs)

        async def passing(text: str, call_next: Next) -> Any:
            return await call_next()

        root.on("text/build", passing)
        assert await root.waterfall("text/build", "t") is None

        async def later() -> str:
            return "inner"

        assert await root.waterfall("text/build", "t", inner=later) == "inner"


async def test_bail_checks_the_argument_count() -> None:
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("tick", lambda n: n)
        with pytest.raises(dsh.DshError, match=r'event "tick" takes 1 argument\(s\) \(n\), got 0'):
            root.bail("tick")


async def test_an_async_listener_in_emit_fails_in_its_turn_and_the_others_still_run() -> None:
    heard: list[str] = []

    async def sleeper(n: int) -> None:
        pass

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("tick", tagged(heard, "a"))
        root.on("tick", sleeper)
        root.on("tick", tagged(heard, "b"))
        with pytest.raises(TypeError, match=r"sleeper.*emit\(\)"):
            root.emit("tick", 1)
        assert heard == ["a", "b"]
        with pytest.raises(TypeError, match=r"sleeper.*bail\(\)"):
            root.bail("tick", 1)
        assert heard == ["a", "b", "a"]


class Picky(dsh.Plugin):
    """A ``@hookimpl`` taking a subset of the spec's arguments by name."""

    @dsh.hookimpl
    def text_pick(self, second: str) -> Any:
        return self.config(second)


class PickSpecs:
    @dsh.hookspec
    def text_pick(self, first: str, second: str) -> Any:
        """Two arguments; a listener may take either by name."""


async def test_a_hookimpl_taking_a_subset_is_named_when_it_returns_an_awaitable() -> None:
    async def later() -> None:
        pass

    async with Context() as root:
        root.events.add_hookspecs(PickSpecs)
        ok = await root.plugin(Picky, lambda second: f"got {second}")
        assert root.bail("text/pick", "a", "b") == "got b"
        await ok.dispose()
        await root.plugin(Picky, lambda second: later())
        with pytest.raises(TypeError, match=r"Picky\.text_pick.*returned an awaitable"):
            root.emit("text/pick", "a", "b")
        with pytest.raises(TypeError, match=r"Picky\.text_pick.*returned an awaitable"):
            root.bail("text/pick", "a", "b")


def by_name_only(method: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator whose wrapper takes keyword arguments only."""

    @functools.wraps(method)
    def wrapper(self: Any, **kwargs: Any) -> Any:
        return method(self, **kwargs)

    return wrapper


class TakesAll(dsh.Plugin):
    """Hookimpls taking every argument of the spec: one plain, one through a wrapper."""

    @dsh.hookimpl
    def text_pick(self, first: str, second: str) -> Any:
        self.config.append(("plain", first, second))
        return None

    @dsh.hookimpl(specname="text_pick")
    @by_name_only
    def wrapped(self, first: str, second: str) -> Any:
        self.config.append(("wrapped", first, second))
        return None


async def test_hookimpls_taking_every_argument_are_called_positionally_unless_wrapped() -> None:
    seen: list[tuple[str, str, str]] = []
    async with Context() as root:
        root.events.add_hookspecs(PickSpecs)
        await root.plugin(TakesAll, seen)
        listeners = root.events.event("text/pick").listeners()
        impls = {listener.fn.__name__: listener for listener in listeners}
        assert impls["text_pick"].picks is None
        assert impls["wrapped"].picks == (("first", 0), ("second", 1))
        root.emit("text/pick", "a", "b")
        assert sorted(seen) == [("plain", "a", "b"), ("wrapped", "a", "b")]
