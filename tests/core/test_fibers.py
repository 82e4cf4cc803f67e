"""Fibers: plugin forms, names, states and transitions (ARCHITECTURE §3.1)."""

from __future__ import annotations

import functools
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, ClassVar

import anyio
import anyio.lowlevel
import pydantic
import pytest

import dsh
from dsh import (
    ConfigError,
    Context,
    Disposer,
    DshError,
    Fiber,
    FiberState,
    InactiveContextError,
    InvalidPluginError,
    Plugin,
)
from dsh.testing import errors_logged, state, until
from tests.core.cancel_support import wait_for_cancel

pytestmark = pytest.mark.anyio


class Specs:
    @dsh.hookspec
    def ping(self, value: object) -> None: ...


class Count(pydantic.BaseModel):
    n: int = 0


# -- states --------------------------------------------------------------------------------


async def test_state_numbers() -> None:
    assert [s.name for s in FiberState] == [
        "PENDING",
        "LOADING",
        "ACTIVE",
        "FAILED",
        "DISPOSED",
        "UNLOADING",
    ]
    assert [int(s) for s in FiberState] == [0, 1, 2, 3, 4, 5]


async def test_a_fiber_walks_through_its_states() -> None:
    ran: list[str] = []
    setup_gate = anyio.Event()
    unload_gate = anyio.Event()

    async def undo() -> None:
        await unload_gate.wait()
        ran.append("undo")

    async def apply(ctx: Context, config: Any) -> Callable[[], Awaitable[None]]:
        ran.append("apply")
        await setup_gate.wait()
        return undo

    async with Context() as root:
        assert state(root.fiber) is FiberState.ACTIVE
        assert root.fiber.name == "root"
        fiber = root.plugin(apply)
        assert isinstance(fiber, Fiber)
        assert state(fiber) is FiberState.LOADING
        assert ran == []  # never runs plugin code before returning
        assert fiber.config is None
        await until(lambda: ran == ["apply"])
        assert state(fiber) is FiberState.LOADING
        setup_gate.set()
        assert await fiber is fiber
        assert state(fiber) is FiberState.ACTIVE
        assert repr(fiber) == "<Fiber 'apply' ACTIVE>"
        unloading = fiber.dispose()
        try:
            await until(lambda: state(fiber) is FiberState.UNLOADING)
        finally:
            unload_gate.set()
        await unloading
        assert state(fiber) is FiberState.DISPOSED
        assert ran == ["apply", "undo"]
    assert state(root.fiber) is FiberState.DISPOSED


async def test_pending_until_the_injected_service_exists() -> None:
    ran: list[str] = []

    def apply(ctx: Context, config: Any) -> None:
        ran.append("apply")

    apply.inject = ["missing"]  # type: ignore[attr-defined]
    async with Context() as root:
        fiber = root.plugin(apply)
        assert state(fiber) is FiberState.PENDING
        assert await fiber is fiber  # returns at once for a PENDING fiber
        assert state(fiber) is FiberState.PENDING
        assert ran == []
        await fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED


async def test_await_ctx_plugin_directly() -> None:
    async with Context() as root:
        fiber = await root.plugin(lambda ctx, config: None)
        assert state(fiber) is FiberState.ACTIVE
        assert fiber.ctx.fiber is fiber
        assert fiber.error is None


# -- plugin forms --------------------------------------------------------------------------


class SetupForms(Plugin):
    Config = Count
    log: ClassVar[list[str]] = []

    def setup(self) -> Any:
        log = self.log
        n = self.config.n
        if n == 0:
            return None
        if n == 1:
            return lambda: log.append("callable")
        if n == 2:
            return self._gen()
        if n == 3:
            return self._agen()
        return self._coro()

    def _gen(self) -> Iterator[Callable[[], None]]:
        yield lambda: self.log.append("gen")

    async def _agen(self) -> AsyncIterator[Callable[[], None]]:
        await anyio.lowlevel.checkpoint()
        yield lambda: self.log.append("agen")

    async def _coro(self) -> Callable[[], None]:
        await anyio.lowlevel.checkpoint()
        return lambda: self.log.append("coro")


@pytest.mark.parametrize(
    ("n", "expected"), [(0, []), (1, ["callable"]), (2, ["gen"]), (3, ["agen"]), (4, ["coro"])]
)
async def test_plugin_subclass_setup_forms(n: int, expected: list[str]) -> None:
    SetupForms.log = []
    async with Context() as root:
        fiber = await root.plugin(SetupForms, {"n": n})
        assert state(fiber) is FiberState.ACTIVE
        assert fiber.name == "SetupForms"
        assert isinstance(fiber.config, Count)
        assert SetupForms.log == []
        await fiber.dispose()
    assert SetupForms.log == expected


async def test_plugin_subclass_gets_ctx_and_config() -> None:
    seen: list[Any] = []

    class Probe(Plugin):
        def setup(self) -> None:
            seen.append((self.ctx, self.config))

    async with Context() as root:
        fiber = await root.plugin(Probe, {"raw": True})
        ((ctx, config),) = seen
        assert ctx is fiber.ctx
        assert config == {"raw": True}  # no Config: the raw config passes through
        assert fiber.config == {"raw": True}


async def test_base_plugin_setup_does_nothing() -> None:
    async with Context() as root:
        fiber = await root.plugin(Plugin)
        assert state(fiber) is FiberState.ACTIVE
        assert fiber.name == "Plugin"


async def test_function_plugin_receives_ctx_and_validated_config() -> None:
    seen: list[Any] = []

    def apply(ctx: Context, config: Count) -> None:
        seen.append((ctx, config))

    apply.Config = Count  # type: ignore[attr-defined]
    apply.name = "counted"  # type: ignore[attr-defined]
    async with Context() as root:
        fiber = await root.plugin(apply, {"n": 3})
        ((ctx, config),) = seen
        assert ctx is fiber.ctx
        assert config == Count(n=3)
        assert fiber.config is config
        assert fiber.name == "counted"


async def test_module_with_apply_config_inject_and_name() -> None:
    seen: list[Any] = []
    mod = types.ModuleType("dsh_test_module_plugin")

    def apply(ctx: Context, config: Any) -> None:
        seen.append(config)

    mod.apply = apply  # type: ignore[attr-defined]
    mod.Config = Count  # type: ignore[attr-defined]
    mod.inject = ["counter"]  # type: ignore[attr-defined]
    async with Context() as root:
        fiber = root.plugin(mod, {"n": 2})
        assert fiber.name == "dsh_test_module_plugin"
        assert state(fiber) is FiberState.PENDING
        root.provide("counter", object())
        await root.settle()
        assert state(fiber) is FiberState.ACTIVE
        assert seen == [Count(n=2)]
        named = types.ModuleType("dsh_test_named_module")
        named.apply = apply  # type: ignore[attr-defined]
        named.name = "named-module"  # type: ignore[attr-defined]
        assert (await root.plugin(named)).name == "named-module"


async def test_module_exposing_plugin() -> None:
    mod = types.ModuleType("dsh_test_module_with_plugin")

    class Inner(Plugin):
        name = "inner-plugin"

    mod.plugin = Inner  # type: ignore[attr-defined]
    async with Context() as root:
        fiber = await root.plugin(mod)
        assert fiber.name == "inner-plugin"


async def test_object_with_apply() -> None:
    seen: list[Any] = []

    class Thing:
        def apply(self, ctx: Context, config: Any) -> None:
            seen.append(config)

    class Named(Thing):
        name = "named-thing"

    async with Context() as root:
        fiber = await root.plugin(Thing(), 5)
        assert fiber.name == "Thing"
        assert seen == [5]
        assert (await root.plugin(Named())).name == "named-thing"


async def test_other_callables_are_function_plugins() -> None:
    seen: list[Any] = []

    def apply(tag: str, ctx: Context, config: Any) -> None:
        seen.append((tag, config))

    async with Context() as root:
        fiber = await root.plugin(functools.partial(apply, "p"), 1)
        assert fiber.name == "partial"
        assert seen == [("p", 1)]


async def test_plugin_spec_is_reused_for_the_same_object() -> None:
    async with Context() as root:

        def apply(ctx: Context, config: Any) -> None:
            pass

        first = await root.plugin(apply)
        second = await root.plugin(apply)
        assert first is not second
        assert first.name == second.name == "apply"
        assert first.state is state(second) is FiberState.ACTIVE


async def test_entry_point_name_is_used_unless_the_plugin_names_itself() -> None:
    class Named(Plugin):
        name = "own-name"

    async with Context() as root:

        def apply(ctx: Context, config: Any) -> None:
            pass

        fiber = root._plugin(apply, name="entry-name")
        assert fiber.name == "entry-name"
        assert fiber.logger.name == "dsh.entry-name"
        assert root.plugin(apply).name == "apply"  # the entry name is not cached
        assert root._plugin(Named, name="entry-name").name == "own-name"
        await root.settle()


class NotAPlugin:
    pass


class BadConfig(Plugin):
    Config = dict  # type: ignore[assignment]


class StringInject(Plugin):
    inject = "tools"  # type: ignore[assignment]


class NonStringInject(Plugin):
    inject: ClassVar[list[Any]] = ["ok", 3]


class KeylessService(dsh.Service):
    pass


@pytest.mark.parametrize(
    ("plugin", "match"),
    [
        (None, "expected a dsh.Plugin subclass"),
        ({}, "expected a dsh.Plugin subclass"),
        (types.SimpleNamespace(apply={}), "expected a dsh.Plugin subclass"),
        (NotAPlugin, "must subclass dsh.Plugin"),
        (BadConfig, "Config must be a pydantic BaseModel"),
        (StringInject, "inject must be a list"),
        (NonStringInject, "inject must be a list"),
        (KeylessService, "must set the class attribute key"),
    ],
)
async def test_invalid_plugins_raise_synchronously(plugin: object, match: str) -> None:
    async with Context() as root:
        with pytest.raises(InvalidPluginError, match=match) as info:
            root.plugin(plugin)
        assert isinstance(info.value, TypeError)
        assert info.value.code == "INVALID_PLUGIN"


# -- failure -------------------------------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True])
async def test_apply_raising_halfway_fails_and_rolls_back(
    is_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    heard: list[str] = []
    undone: list[str] = []

    def register(ctx: Context) -> None:
        ctx.events.add_hookspecs(Specs)
        ctx.on("ping", lambda value: heard.append(f"doomed {value}"))
        ctx.provide("doomed_service", object())
        ctx.effect(lambda: lambda: undone.append("effect"))

    def sync_apply(ctx: Context, config: Any) -> None:
        register(ctx)
        raise ValueError("halfway")

    async def async_apply(ctx: Context, config: Any) -> None:
        register(ctx)
        await anyio.lowlevel.checkpoint()
        raise ValueError("halfway")

    def sibling(ctx: Context, config: Any) -> None:
        ctx.events.add_hookspecs(Specs)
        ctx.on("ping", lambda value: heard.append(f"sibling {value}"))

    doomed = async_apply if is_async else sync_apply
    async with Context() as root:
        ok = root.plugin(sibling)
        bad = root.plugin(doomed)
        with pytest.raises(ValueError, match="halfway"):
            await bad
        await ok
        assert state(bad) is FiberState.FAILED
        assert isinstance(bad.error, ValueError)
        assert state(ok) is FiberState.ACTIVE
        assert undone == ["effect"]
        assert root.get("doomed_service") is None
        root.emit("ping", 1)
        assert heard == ["sibling 1"]
        with pytest.raises(ValueError, match="halfway"):
            await bad  # still FAILED
        await bad.dispose()
        await bad.dispose()
        assert state(bad) is FiberState.DISPOSED
    records = errors_logged(caplog)
    assert len(records) == 1  # logged once, with the plugin name
    assert records[0].name == f"dsh.{doomed.__name__}"
    assert doomed.__name__ in records[0].getMessage()


async def test_one_plugin_two_fibers_one_failing(caplog: pytest.LogCaptureFixture) -> None:
    heard: list[object] = []

    def apply(ctx: Context, config: Any) -> None:
        ctx.events.add_hookspecs(Specs)
        ctx.on("ping", heard.append)
        if config["fail"]:
            raise RuntimeError("asked to")

    async with Context() as root:
        bad = root.plugin(apply, {"fail": True})
        good = root.plugin(apply, {"fail": False})
        await root.settle()
        assert state(bad) is FiberState.FAILED
        assert state(good) is FiberState.ACTIVE
        root.emit("ping", "x")
        assert heard == ["x"]
    assert len(errors_logged(caplog)) == 1


async def test_effects_created_during_a_failed_load_rollback_are_refused() -> None:
    seen: list[BaseException] = []

    def apply(ctx: Context, config: Any) -> None:
        def undo() -> None:
            try:
                ctx.effect(lambda: None)
            except InactiveContextError as exc:
                seen.append(exc)

        ctx.effect(lambda: undo)
        raise RuntimeError("fail")

    async with Context() as root:
        fiber = root.plugin(apply)
        with pytest.raises(RuntimeError):
            await fiber
    assert len(seen) == 1


async def test_a_failed_fiber_that_took_effects_later_undoes_them_on_dispose() -> None:
    log: list[str] = []

    def apply(ctx: Context, config: Any) -> None:
        raise RuntimeError("fail")

    async with Context() as root:
        fiber = root.plugin(apply)
        with pytest.raises(RuntimeError):
            await fiber
        fiber.ctx.effect(lambda: lambda: log.append("late"))
        await fiber.dispose()
        assert log == ["late"]
        assert state(fiber) is FiberState.DISPOSED


# -- dispose -------------------------------------------------------------------------------


async def test_dispose_during_async_setup_cancels_and_undoes() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def apply(ctx: Context, config: Any) -> AsyncIterator[Callable[[], None]]:
        ctx.effect(lambda: lambda: log.append("separate"))
        yield lambda: log.append("yielded")
        await wait_for_cancel(started, log, "cancelled")
        yield lambda: log.append("never")

    async with Context() as root:
        fiber = root.plugin(apply)
        await started.wait()
        assert state(fiber) is FiberState.LOADING
        await fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
        assert log[0] == "cancelled"
        assert sorted(log[1:]) == ["separate", "yielded"]
        assert fiber.error is None
        assert await fiber is fiber


async def test_dispose_during_an_awaited_apply() -> None:
    started = anyio.Event()
    log: list[str] = []

    async def apply(ctx: Context, config: Any) -> None:
        ctx.effect(lambda: lambda: log.append("before"))
        started.set()
        await anyio.sleep_forever()

    async with Context() as root:
        fiber = root.plugin(apply)
        await started.wait()
        await fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
        assert log == ["before"]


async def test_dispose_before_the_load_started_runs_no_plugin_code() -> None:
    ran: list[str] = []
    async with Context() as root:
        fiber = root.plugin(lambda ctx, config: ran.append("apply"))
        await fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
        assert ran == []


async def test_dispose_from_inside_a_sync_generator_setup() -> None:
    log: list[str] = []

    def apply(ctx: Context, config: Any) -> Iterator[Callable[[], None]]:
        yield lambda: log.append("a")
        ctx.fiber.dispose()
        log.append("body goes on")
        yield lambda: log.append("b")

    async with Context() as root:
        fiber = root.plugin(apply)
        await root.settle()
        assert state(fiber) is FiberState.DISPOSED
        assert log == ["body goes on", "b", "a"]


async def test_effects_added_to_a_pending_fiber_run_on_dispose() -> None:
    log: list[str] = []

    def apply(ctx: Context, config: Any) -> None:
        pass

    apply.inject = ["never"]  # type: ignore[attr-defined]
    async with Context() as root:
        fiber = root.plugin(apply)
        assert state(fiber) is FiberState.PENDING
        fiber.ctx.effect(lambda: lambda: log.append("pending effect"))
        await fiber.dispose()
        assert log == ["pending effect"]
        assert state(fiber) is FiberState.DISPOSED


async def test_dispose_is_one_exact_disposer_and_disposing_twice_is_a_no_op() -> None:
    count: list[int] = []
    async with Context() as root:
        fiber = await root.plugin(lambda ctx, config: lambda: count.append(1))
        d = fiber.dispose
        assert isinstance(d, Disposer)
        assert fiber.dispose is d
        await d()
        await d()
        await fiber.dispose()
        assert count == [1]
        with pytest.raises(InactiveContextError):
            fiber.ctx.plugin(lambda ctx, config: None)


async def test_disposing_a_fiber_disposes_its_children() -> None:
    log: list[str] = []
    fibers: dict[str, Fiber] = {}

    def level(name: str, child: Any) -> Any:
        def apply(ctx: Context, config: Any) -> Callable[[], None]:
            if child is not None:
                fibers[child.__name__] = ctx.plugin(child)
            return lambda: log.append(name)

        apply.__name__ = name
        return apply

    leaf = level("leaf", None)
    middle = level("middle", leaf)
    top = level("top", middle)
    async with Context() as root:
        fibers["top"] = root.plugin(top)
        await root.settle()
        assert all(state(f) is FiberState.ACTIVE for f in fibers.values())
        assert fibers["leaf"].name == "leaf"
        await fibers["top"].dispose()
        assert all(state(f) is FiberState.DISPOSED for f in fibers.values())
        assert sorted(log) == ["leaf", "middle", "top"]


async def test_composite_yielding_a_child_dispose_orders_its_teardown() -> None:
    log: list[str] = []

    async def child_undo() -> None:
        log.append("child-start")
        for _ in range(4):
            await anyio.lowlevel.checkpoint()
        log.append("child-end")

    def child(ctx: Context, config: Any) -> Callable[[], Awaitable[None]]:
        return child_undo

    async def tail() -> None:
        await anyio.lowlevel.checkpoint()
        log.append("after-child")

    def parent(ctx: Context, config: Any) -> Iterator[Callable[[], object]]:
        yield lambda: log.append("before-child")
        yield ctx.plugin(child).dispose
        yield tail

    async with Context() as root:
        fiber = root.plugin(parent)
        await root.settle()
        await fiber.dispose()
    assert log == ["after-child", "child-start", "child-end", "before-child"]


async def test_root_dispose_disposes_its_plugins_and_stays_active() -> None:
    log: list[str] = []
    async with Context() as root:
        fiber = await root.plugin(lambda ctx, config: lambda: log.append("child"))
        await root.fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
        assert state(root.fiber) is FiberState.ACTIVE
        await root.fiber.dispose()  # idempotent
        assert log == ["child"]
        again = await root.plugin(lambda ctx, config: None)
        assert state(again) is FiberState.ACTIVE


async def test_root_dispose_logs_errors(caplog: pytest.LogCaptureFixture) -> None:
    async with Context() as root:
        root.effect(lambda: lambda: 1 / 0)
        await root.fiber.dispose()
    assert [r.name for r in errors_logged(caplog)] == ["dsh.root"]


async def test_root_cannot_be_restarted_or_updated() -> None:
    async with Context() as root:
        with pytest.raises(DshError, match="root fiber cannot be restarted"):
            await root.fiber.restart()
        with pytest.raises(DshError, match="root fiber cannot be updated"):
            await root.fiber.update({})


# -- restart and update --------------------------------------------------------------------


async def test_restart_unloads_and_loads_again() -> None:
    log: list[str] = []

    def apply(ctx: Context, config: Any) -> Callable[[], None]:
        log.append("apply")
        return lambda: log.append("undo")

    async with Context() as root:
        fiber = await root.plugin(apply)
        assert await fiber.restart() is fiber
        assert state(fiber) is FiberState.ACTIVE
        assert log == ["apply", "undo", "apply"]


async def test_restart_retries_a_failed_fiber() -> None:
    attempts: list[int] = []

    def apply(ctx: Context, config: Any) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first time")

    async with Context() as root:
        fiber = root.plugin(apply)
        with pytest.raises(RuntimeError):
            await fiber
        await fiber.restart()
        assert state(fiber) is FiberState.ACTIVE
        assert fiber.error is None
        assert len(attempts) == 2


async def test_restart_during_load_loads_again() -> None:
    gate = anyio.Event()
    runs: list[int] = []

    async def apply(ctx: Context, config: Any) -> None:
        runs.append(1)
        await gate.wait()

    async with Context() as root:
        fiber = root.plugin(apply)
        await until(lambda: runs == [1])

        async def release() -> None:
            await until(lambda: len(runs) == 1)
            gate.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(release)
            await fiber.restart()
        assert runs == [1, 1]
        assert state(fiber) is FiberState.ACTIVE


async def test_invalid_update_on_an_active_fiber_keeps_the_old_config() -> None:
    seen: list[int] = []

    class P(Plugin):
        Config = Count

        def setup(self) -> None:
            seen.append(self.config.n)

    async with Context() as root:
        fiber = await root.plugin(P, {"n": 1})
        with pytest.raises(ConfigError, match=r"Input should be a valid integer.*\(at n\)"):
            await fiber.update({"n": "many"})
        assert state(fiber) is FiberState.ACTIVE
        assert fiber.config == Count(n=1)
        assert seen == [1]
        await fiber.restart()
        assert seen == [1, 1]  # the rejected config was not stored
        assert await fiber.update({"n": 2}) is fiber
        assert fiber.config == Count(n=2)
        assert seen == [1, 1, 2]


async def test_update_repairs_a_failed_fiber() -> None:
    class P(Plugin):
        Config = Count

    async with Context() as root:
        fiber = root.plugin(P, {"n": "bad"})
        with pytest.raises(ConfigError):
            await fiber
        assert state(fiber) is FiberState.FAILED
        assert fiber.config is None  # never validated
        await fiber.update({"n": 4})
        assert state(fiber) is FiberState.ACTIVE
        assert fiber.config == Count(n=4)


async def test_update_on_a_pending_fiber_stores_the_config() -> None:
    class P(Plugin):
        Config = Count
        inject = ("svc",)

    async with Context() as root:
        fiber = root.plugin(P, {"n": 1})
        assert await fiber.update({"n": "not validated yet"}) is fiber
        assert state(fiber) is FiberState.PENDING
        await fiber.update({"n": 9})
        root.provide("svc", 1)
        await root.settle()
        assert state(fiber) is FiberState.ACTIVE
        assert fiber.config == Count(n=9)


async def test_restart_and_update_on_a_disposed_fiber_raise() -> None:
    async with Context() as root:
        fiber = await root.plugin(lambda ctx, config: None)
        await fiber.dispose()
        with pytest.raises(InactiveContextError):
            await fiber.restart()
        with pytest.raises(InactiveContextError):
            await fiber.update({})
