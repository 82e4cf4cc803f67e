"""Events on pluggy hookspecs: declaration, listeners, five dispatch modes, scopes (§3.4)."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable, Generator
from typing import Any, ClassVar

import anyio
import pytest

import dsh
from dsh import Context, DshError, FiberState, InvalidPluginError, Plugin, UnknownEventError
from dsh.testing import state

pytestmark = pytest.mark.anyio


Next = Callable[[], Awaitable[Any]]


class Specs:
    @dsh.hookspec
    def note_add(self, item: object, tag: str) -> None:
        """The event "note/add"."""

    @dsh.hookspec
    def text_build(self, text: str, call_next: Next) -> str:
        """The waterfall "text/build"."""
        return text

    @dsh.hookspec
    def tick(self) -> None:
        """The event "tick" (no arguments)."""


class OtherSpecs:
    @dsh.hookspec
    def other_event(self) -> None: ...


async def root_with_specs(root: Context) -> Context:
    root.events.add_hookspecs(Specs)
    return root


# -- declaration ---------------------------------------------------------------------------


async def test_add_hookspecs_is_idempotent_and_names_map_to_hooks() -> None:
    async with Context() as root:
        assert root.events is root.fiber.ctx.events
        root.events.add_hookspecs(Specs)
        root.events.add_hookspecs(Specs)  # the same spec again: nothing happens
        assert root.events.pm.hook.note_add.spec is not None
        heard: list[tuple[object, str]] = []
        root.on("note/add", lambda item, tag: heard.append((item, tag)))
        root.emit("note_add", 1, "hook spelling")
        root.emit("note/add", 2, "event spelling")
        assert heard == [(1, "hook spelling"), (2, "event spelling")]


async def test_hookspecs_class_attribute_declares_events_when_the_fiber_starts() -> None:
    class Owner(Plugin):
        hookspecs = OtherSpecs

    async with Context() as root:
        with pytest.raises(UnknownEventError):
            root.emit("other-event")
        root.plugin(Owner)
        root.emit("other-event")  # declared as soon as the fiber was created
        await root.settle()


@pytest.mark.parametrize("mode", ["on", "emit", "bail", "serial", "parallel", "waterfall"])
async def test_unknown_events_raise_naming_the_event(mode: str) -> None:
    async with Context() as root:
        root.events.add_hookspecs(Specs)

        async def attempt() -> None:
            if mode == "on":
                root.on("note/ad", print)
            elif mode in ("emit", "bail"):
                getattr(root, mode)("note/ad")
            else:
                await getattr(root, mode)("note/ad")

        with pytest.raises(UnknownEventError, match='"note/ad"') as info:
            await attempt()
        assert info.value.code == "UNKNOWN_EVENT"
        assert isinstance(info.value, LookupError)
        assert "note_ad" in str(info.value)


async def test_wrong_argument_count_is_a_type_error() -> None:
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        with pytest.raises(
            TypeError, match=r'"note/add" takes 2 argument\(s\) \(item, tag\), got 1'
        ):
            root.emit("note/add", 1)
        with pytest.raises(TypeError, match=r"takes 0 argument\(s\) \(none\), got 1"):
            await root.serial("tick", 1)
        with pytest.raises(DshError):
            await root.waterfall("text/build")


# -- listeners -----------------------------------------------------------------------------


async def test_on_listeners_live_with_their_fiber_and_prepend_goes_first() -> None:
    heard: list[str] = []

    def apply(ctx: Context, config: Any) -> None:
        ctx.on("tick", lambda: heard.append("plugin"))
        ctx.on("tick", lambda: heard.append("plugin-first"), prepend=True)

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        d = root.on("tick", lambda: heard.append("root"))
        fiber = await root.plugin(apply)
        root.emit("tick")
        assert heard == ["plugin-first", "root", "plugin"]
        await fiber.dispose()
        heard.clear()
        root.emit("tick")
        assert heard == ["root"]
        d()
        root.emit("tick")
        assert heard == ["root"]


class Listening(Plugin):
    hookspecs = Specs
    heard: ClassVar[list[object]] = []

    @dsh.hookimpl
    def note_add(self, tag: str) -> None:  # a subset of the spec's arguments, by name
        self.heard.append(("normal", tag))

    @dsh.hookimpl(tryfirst=True)
    def tick(self) -> None:
        self.heard.append("first")

    @dsh.hookimpl
    async def text_build(self, call_next: Next, text: str) -> str:
        return f"[{await call_next()}|{text}]"

    def not_a_hook(self) -> None:
        raise AssertionError("never called")


class LateListener(Plugin):
    hookspecs = Specs

    @dsh.hookimpl(trylast=True)
    def tick(self) -> None:
        Listening.heard.append("last")


async def test_hookimpl_methods_are_registered_while_the_fiber_is_active() -> None:
    Listening.heard = []
    async with Context() as root:
        late = root.plugin(LateListener)  # declares the events at once
        root.on("tick", lambda: Listening.heard.append("root"))
        fiber = root.plugin(Listening)
        await root.settle()
        plugins = root.events.pm.get_plugins()
        assert any(isinstance(p, Listening) for p in plugins)
        root.emit("note/add", 1, "t")
        root.emit("tick")
        assert Listening.heard == [("normal", "t"), "first", "root", "last"]
        assert await root.waterfall("text/build", "x", inner=lambda: "core") == "[core|x]"
        await fiber.restart()  # re-registers on the new instance
        assert await root.waterfall("text/build", "y", inner=lambda: "core") == "[core|y]"
        await fiber.dispose()
        await late.dispose()
        Listening.heard = []
        root.emit("note/add", 1, "t")
        root.emit("tick")
        assert Listening.heard == ["root"]
        assert not any(isinstance(p, Listening) for p in root.events.pm.get_plugins())


async def test_hookimpl_for_an_undeclared_event_fails_the_plugin() -> None:
    class Typo(Plugin):
        hookspecs = Specs

        @dsh.hookimpl
        def tick(self) -> None:
            pass

        @dsh.hookimpl
        def note_addd(self) -> None:
            pass

    async with Context() as root:
        fiber = root.plugin(Typo)
        with pytest.raises(UnknownEventError, match="note_addd"):
            await fiber
        assert state(fiber) is FiberState.FAILED
        assert root.events.pm.get_plugins() == set()
        root.emit("tick")  # the listener registered before the error is gone too


async def test_hookimpl_with_arguments_the_spec_lacks_fails_the_plugin() -> None:
    class Wrong(Plugin):
        hookspecs = Specs

        @dsh.hookimpl
        def note_add(self, colour: str) -> None:
            pass

    async with Context() as root:
        fiber = root.plugin(Wrong)
        with pytest.raises(InvalidPluginError, match="colour"):
            await fiber


# -- emit and bail -------------------------------------------------------------------------


async def test_emit_runs_every_listener_then_raises_the_error() -> None:
    heard: list[str] = []

    def boom() -> None:
        heard.append("boom")
        raise ValueError("one")

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("tick", boom)
        root.on("tick", lambda: heard.append("after"))
        with pytest.raises(ValueError, match="one"):
            root.emit("tick")
        assert heard == ["boom", "after"]


async def test_emit_raises_an_exception_group_for_several_errors() -> None:
    def fail(msg: str) -> Callable[[], None]:
        def listener() -> None:
            raise ValueError(msg)

        return listener

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("tick", fail("a"))
        root.on("tick", fail("b"))
        with pytest.raises(ExceptionGroup) as info:
            root.emit("tick")
        assert [str(e) for e in info.value.exceptions] == ["a", "b"]
        assert "tick" in str(info.value)


async def test_async_listener_in_emit_or_bail_is_a_type_error_naming_it() -> None:
    async def async_listener() -> None:
        pass

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("tick", async_listener)
        with pytest.raises(TypeError, match="async_listener") as info:
            root.emit("tick")
        assert isinstance(info.value, DshError)
        assert info.value.code == "EVENT_USAGE"
        with pytest.raises(TypeError, match=r"async_listener.*bail\(\)"):
            root.bail("tick")


class Pending:
    """An awaitable without ``close``."""

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


async def test_sync_listener_returning_an_awaitable_in_emit_is_a_type_error() -> None:
    async def later() -> None:
        pass

    async with Context() as root:
        root.events.add_hookspecs(Specs)

        def sync_returning_a_coroutine() -> Awaitable[None]:
            return later()

        d = root.on("tick", sync_returning_a_coroutine)
        with pytest.raises(TypeError, match="returned an awaitable"):
            root.emit("tick")
        gc.collect()  # the coroutine was closed: no "never awaited" warning
        d()
        root.on("tick", Pending)
        with pytest.raises(TypeError, match="returned an awaitable"):
            root.bail("tick")


async def test_bail_returns_the_first_non_none_result() -> None:
    called: list[str] = []
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("tick", lambda: called.append("a"))
        root.on("tick", lambda: "b")
        root.on("tick", lambda: called.append("c"))
        assert root.bail("tick") == "b"
        assert called == ["a"]


async def test_bail_without_a_result_is_none_and_errors_propagate() -> None:
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        assert root.bail("tick") is None
        root.on("tick", lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            root.bail("tick")


# -- serial and parallel -------------------------------------------------------------------


async def test_serial_returns_the_first_non_none_result_in_order() -> None:
    called: list[str] = []

    async def first() -> None:
        called.append("first")

    async def second() -> str:
        await anyio.lowlevel.checkpoint()
        return "second"

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        assert await root.serial("tick") is None
        root.on("tick", first)
        root.on("tick", lambda: None)
        root.on("tick", second)
        root.on("tick", lambda: called.append("never"))
        assert await root.serial("tick") == "second"
        assert called == ["first"]
        root.on("tick", lambda: "sync", prepend=True)
        assert await root.serial("tick") == "sync"


async def test_parallel_runs_listeners_concurrently_to_completion() -> None:
    a_ran = anyio.Event()
    b_ran = anyio.Event()
    done: list[str] = []

    async def a() -> None:
        a_ran.set()
        await b_ran.wait()  # only possible if b runs concurrently
        done.append("a")

    async def b() -> None:
        b_ran.set()
        await a_ran.wait()
        done.append("b")

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("tick", a)
        root.on("tick", b)
        root.on("tick", lambda: done.append("sync"))
        await root.parallel("tick")
        assert sorted(done) == ["a", "b", "sync"]


async def test_parallel_raises_all_failures_together() -> None:
    finished: list[str] = []

    async def slow_ok() -> None:
        await anyio.lowlevel.checkpoint()
        finished.append("ok")

    async def bad(msg: str) -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError(msg)

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("note/add", lambda item, tag: bad(f"{tag}1"))
        root.on("note/add", lambda item, tag: slow_ok())
        root.on("note/add", lambda item, tag: bad(f"{tag}2"))
        with pytest.raises(ExceptionGroup) as info:
            await root.parallel("note/add", None, "x")
        assert sorted(str(e) for e in info.value.exceptions) == ["x1", "x2"]
        assert info.value.message == '2 listeners of "note/add" failed'
        assert finished == ["ok"]


async def test_parallel_names_a_single_failure_in_the_singular() -> None:
    async def bad() -> None:
        raise ValueError("alone")

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("note/add", lambda item, tag: bad())
        with pytest.raises(ExceptionGroup) as info:
            await root.parallel("note/add", None, "x")
        assert info.value.message == '1 listener of "note/add" failed'


# -- waterfall -----------------------------------------------------------------------------


async def test_waterfall_chain_and_inner() -> None:
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        assert await root.waterfall("text/build", "t") is None  # no listener, no inner
        assert await root.waterfall("text/build", "t", inner=lambda: "in") == "in"

        async def async_inner() -> str:
            await anyio.lowlevel.checkpoint()
            return "async-in"

        assert await root.waterfall("text/build", "t", inner=async_inner) == "async-in"

        async def add_one(text: str, call_next: Next) -> int:
            return int(await call_next()) + 1

        root.on("text/build", add_one)
        root.on("text/build", add_one)
        assert await root.waterfall("text/build", "t", inner=lambda: 2) == 4


async def test_waterfall_short_circuits_and_the_first_listeners_value_wins() -> None:
    called: list[str] = []

    async def outer(text: str, call_next: Next) -> str:
        called.append("outer")
        return f"outer({await call_next()})"

    def stop(text: str, call_next: Next) -> str:  # a sync listener short-circuits
        called.append("stop")
        return f"stop:{text}"

    def never(text: str, call_next: Next) -> str:
        called.append("never")
        return "never"

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("text/build", outer)
        root.on("text/build", stop)
        root.on("text/build", never)

        def inner() -> str:
            called.append("inner")
            return "inner"

        value = await root.waterfall("text/build", "t", inner=inner)
        assert value == "outer(stop:t)"
        assert called == ["outer", "stop"]


async def test_waterfall_listener_returning_none_is_an_error_naming_it() -> None:
    async def forgot_return(text: str, call_next: Next) -> None:
        await call_next()

    def sync_none(text: str, call_next: Next) -> None:
        return None

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        d = root.on("text/build", forgot_return)
        with pytest.raises(TypeError, match=r"forgot_return.*returned None") as info:
            await root.waterfall("text/build", "t", inner=lambda: "value")
        assert info.value.code == "EVENT_USAGE"  # type: ignore[attr-defined]
        # returning None is fine when the rest of the chain produced None
        assert await root.waterfall("text/build", "t") is None
        d()
        root.on("text/build", sync_none)
        with pytest.raises(DshError, match="sync_none"):
            await root.waterfall("text/build", "t")


async def test_calling_call_next_twice_is_an_error() -> None:
    async def greedy(text: str, call_next: Next) -> str:
        await call_next()
        return str(await call_next())

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("text/build", greedy)
        with pytest.raises(DshError, match=r"greedy.*call_next\(\) twice"):
            await root.waterfall("text/build", "t", inner=lambda: "x")


async def test_waterfall_on_an_event_that_is_not_one() -> None:
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        with pytest.raises(TypeError, match="not a waterfall"):
            await root.waterfall("tick")


# -- scope filtering -----------------------------------------------------------------------


class AgentKey:
    def __repr__(self) -> str:
        return "AgentKey"


async def test_scope_filtering_in_every_mode() -> None:
    agent, other = AgentKey(), AgentKey()
    heard: list[str] = []

    def listener(tag: str) -> Callable[[], None]:
        return lambda: heard.append(tag)

    def wf(tag: str) -> Callable[[str, Next], Awaitable[str]]:
        async def step(text: str, call_next: Next) -> str:
            heard.append(tag)
            return str(await call_next())

        return step

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        scoped = root.scoped(agent)
        assert scoped.scope is agent
        assert root.scope is None
        assert scoped.fiber is root.fiber
        assert "scope=AgentKey" in repr(scoped)
        root.on("tick", listener("global"))
        scoped.on("tick", listener("agent"))
        root.scoped(other).on("tick", listener("other"))
        root.on("text/build", wf("global"))
        scoped.on("text/build", wf("agent"))
        root.scoped(other).on("text/build", wf("other"))

        root.emit("tick")  # omitted: unfiltered, everyone hears it
        assert heard == ["global", "agent", "other"]
        for run in (
            lambda: root.emit("tick", scope=agent),
            lambda: root.bail("tick", scope=agent),
        ):
            heard.clear()
            run()
            assert heard == ["global", "agent"]
        heard.clear()
        await root.serial("tick", scope=agent)
        assert heard == ["global", "agent"]
        heard.clear()
        await root.parallel("tick", scope=agent)
        assert sorted(heard) == ["agent", "global"]
        heard.clear()
        await root.waterfall("text/build", "t", inner=lambda: "v", scope=agent)
        assert heard == ["global", "agent"]
        heard.clear()
        root.emit("tick", scope=None)  # the global view
        assert heard == ["global"]
        heard.clear()
        await root.parallel("tick")
        assert sorted(heard) == ["agent", "global", "other"]


async def test_hookimpls_of_a_plugin_loaded_from_a_scoped_context_are_scoped() -> None:
    agent = AgentKey()

    class Scoped(Plugin):
        hookspecs = Specs
        heard: ClassVar[list[str]] = []

        @dsh.hookimpl
        def tick(self) -> None:
            self.heard.append("scoped plugin")

    async with Context() as root:
        fiber = await root.scoped(agent).plugin(Scoped)
        assert fiber.ctx.scope is agent
        root.emit("tick", scope=None)
        assert Scoped.heard == []
        root.emit("tick", scope=agent)
        assert Scoped.heard == ["scoped plugin"]
        root.emit("tick")
        assert Scoped.heard == ["scoped plugin", "scoped plugin"]
