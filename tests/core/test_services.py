"""Services: providing, injecting and caller attribution (ARCHITECTURE §3.3)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import anyio
import anyio.lowlevel
import pydantic
import pytest

import dsh
from dsh import (
    Context,
    Disposer,
    Fiber,
    FiberState,
    Plugin,
    Service,
    ServiceConflictError,
    ServiceNotFoundError,
)
from dsh.testing import state, until

pytestmark = pytest.mark.anyio


class Registry(Service):
    """A service whose registrations are effects of the *calling* plugin."""

    key = "registry"

    def __init__(self, ctx: Context, config: Any) -> None:
        super().__init__(ctx, config)
        self.items: list[str] = []
        self.note = ""

    def register(self, item: str) -> Disposer:
        def body() -> Callable[[], None]:
            self.items.append(item)
            return lambda: self.items.remove(item)

        return self.ctx.effect(body, label=f"register {item}")

    def owner(self) -> Fiber:
        return self.ctx.fiber


# -- providing -----------------------------------------------------------------------------


async def test_service_subclass_is_provided_while_active() -> None:
    async with Context() as root:
        assert root.get("registry") is None
        fiber = await root.plugin(Registry)
        view = root.registry
        assert isinstance(view, Registry)
        assert view.ctx is root  # the caller's context
        assert view.home_ctx is fiber.ctx  # the service's own
        assert view.home_ctx.fiber is fiber
        assert root.get("registry").items == []
        assert hasattr(root, "registry")
        await fiber.dispose()
        assert root.get("registry") is None
        assert not hasattr(root, "registry")


async def test_provide_and_get_plain_values() -> None:
    async with Context() as root:
        d = root.provide("answer", 42)
        assert isinstance(d, Disposer)
        assert root.get("answer") == 42
        assert root.answer == 42
        d()  # the slot is gone before the call returns
        assert root.get("answer") is None
        with pytest.raises(ServiceNotFoundError, match="no plugin provides it"):
            _ = root.answer
        await d()


async def test_missing_service_errors_are_attribute_errors() -> None:
    async with Context() as root:
        with pytest.raises(ServiceNotFoundError, match=r"ctx\.nope.*\"nope\"") as info:
            _ = root.nope
        assert isinstance(info.value, AttributeError)
        assert isinstance(info.value, dsh.DshError)
        assert info.value.code == "SERVICE_MISSING"
        assert getattr(root, "nope", None) is None
        assert not hasattr(root, "nope")
        with pytest.raises(AttributeError) as private:
            _ = root._private
        assert not isinstance(private.value, ServiceNotFoundError)


async def test_second_provider_fails_naming_the_first() -> None:
    class First(Service):
        key = "shared"

    class Second(Service):
        key = "shared"

    async with Context() as root:
        first = await root.plugin(First)
        second = root.plugin(Second)
        with pytest.raises(
            ServiceConflictError, match=r'already provided by plugin "First"'
        ) as info:
            await second
        assert info.value.code == "SERVICE_CONFLICT"
        assert state(second) is FiberState.FAILED
        assert state(first) is FiberState.ACTIVE
        assert isinstance(root.shared, First)
        with pytest.raises(ServiceConflictError, match="First"):
            root.provide("shared", 1)


async def test_get_is_none_while_the_provider_is_not_active() -> None:
    gate = anyio.Event()
    provided = anyio.Event()

    class Slow(Service):
        key = "slow"

        async def setup(self) -> None:
            provided.set()  # the constructor has provided it already
            await gate.wait()

    async with Context() as root:
        fiber = root.plugin(Slow)
        await provided.wait()
        assert state(fiber) is FiberState.LOADING
        assert root.get("slow") is None
        with pytest.raises(ServiceNotFoundError, match='provider "Slow" is not active'):
            _ = root.slow
        gate.set()
        await fiber
        assert isinstance(root.get("slow"), Slow)


# -- inject --------------------------------------------------------------------------------


class Value(Service):
    """Provides ``value`` at ctx.value; its config is the value."""

    key = "value"

    class Config(pydantic.BaseModel):
        v: int = 0


class Dependent(Plugin):
    inject = ("value",)
    log: ClassVar[list[str]] = []

    def setup(self) -> Callable[[], Awaitable[None]]:
        v = self.ctx.value.config.v
        self.log.append(f"apply {v}")

        async def undo() -> None:
            self.log.append(f"undo-start {v}")
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
            self.log.append(f"undo-end {v}")

        return undo


async def test_inject_pending_active_pending_and_replaced() -> None:
    Dependent.log = []
    async with Context() as root:
        dep = root.plugin(Dependent)
        assert state(dep) is FiberState.PENDING
        await dep
        assert Dependent.log == []
        p1 = root.plugin(Value, {"v": 1})
        await root.settle()
        assert state(dep) is FiberState.ACTIVE
        assert Dependent.log == ["apply 1"]
        await p1.dispose()
        assert state(dep) is FiberState.PENDING  # the provider waited for it
        assert Dependent.log == ["apply 1", "undo-start 1", "undo-end 1"]
        root.plugin(Value, {"v": 2})
        await root.settle()
        assert state(dep) is FiberState.ACTIVE
        assert Dependent.log[-1] == "apply 2"


async def test_provider_dispose_waits_for_dependents_before_its_own_effects() -> None:
    Dependent.log = []

    class Provider(Value):
        def setup(self) -> Callable[[], None]:
            return lambda: Dependent.log.append("provider's own undo")

    async with Context() as root:
        provider = root.plugin(Provider, {"v": 7})
        dep = root.plugin(Dependent)
        await root.settle()
        await provider.dispose()
        assert Dependent.log == [
            "apply 7",
            "undo-start 7",
            "undo-end 7",
            "provider's own undo",
        ]
        assert state(dep) is FiberState.PENDING
        assert state(provider) is FiberState.DISPOSED


async def test_provider_config_update_restarts_dependents() -> None:
    Dependent.log = []
    async with Context() as root:
        provider = root.plugin(Value, {"v": 1})
        dep = root.plugin(Dependent)
        await root.settle()
        await provider.update({"v": 5})
        await root.settle()
        assert state(dep) is FiberState.ACTIVE
        assert Dependent.log == ["apply 1", "undo-start 1", "undo-end 1", "apply 5"]


async def test_a_failed_dependent_retries_only_for_a_different_provider() -> None:
    attempts: list[int] = []

    def picky(ctx: Context, config: Any) -> None:
        attempts.append(ctx.value.config.v)
        if ctx.value.config.v < 3:
            raise ValueError("too small")

    picky.inject = ["value"]  # type: ignore[attr-defined]
    async with Context() as root:
        provider = root.plugin(Value, {"v": 1})
        dep = root.plugin(picky)
        await root.settle()
        assert state(dep) is FiberState.FAILED
        await provider.update({"v": 2})  # the same provider (uid) comes back
        await root.settle()
        assert state(dep) is FiberState.FAILED
        assert attempts == [1]
        await provider.dispose()
        root.plugin(Value, {"v": 3})  # a different provider: the dependent retries
        await root.settle()
        assert state(dep) is FiberState.ACTIVE
        assert attempts == [1, 3]


def gated_dependent(gate: anyio.Event, log: list[str]) -> Any:
    async def dependent(ctx: Context, config: Any) -> Callable[[], None]:
        log.append("apply")
        await gate.wait()
        return lambda: log.append("undo")

    dependent.inject = ["svc"]  # type: ignore[attr-defined]
    return dependent


async def loading_dependent(root: Context) -> tuple[anyio.Event, list[str], Disposer, Fiber]:
    """``svc`` provided by the root and a dependent on it busy loading until the gate
    returned is set: the gate, the dependent's log, the provision and the dependent."""
    gate = anyio.Event()
    log: list[str] = []
    provided = root.provide("svc", 1)
    dep = root.plugin(gated_dependent(gate, log))
    await until(lambda: log == ["apply"])
    return gate, log, provided, dep


async def test_a_dependency_removed_mid_load_unloads_after_the_load() -> None:
    async with Context() as root:
        gate, log, provided, dep = await loading_dependent(root)
        provided()  # not awaited: the dependent is busy loading
        assert state(dep) is FiberState.LOADING
        gate.set()
        await root.settle()
        assert state(dep) is FiberState.PENDING
        assert log == ["apply", "undo"]
        root.provide("svc", 2)
        await root.settle()
        assert state(dep) is FiberState.ACTIVE
        assert log == ["apply", "undo", "apply"]


async def test_the_same_provider_returning_mid_load_does_not_restart() -> None:
    async with Context() as root:
        gate, log, provided, dep = await loading_dependent(root)
        provided()
        root.provide("svc", 2)  # the same provider fiber (the root) provides it again
        gate.set()
        await root.settle()
        assert state(dep) is FiberState.ACTIVE
        assert log == ["apply"]


async def test_each_apply_runs_once_whatever_the_start_order() -> None:
    runs: list[str] = []

    def provider(key: str, *needs: str) -> Any:
        async def apply(ctx: Context, config: Any) -> None:
            runs.append(key)
            await anyio.lowlevel.checkpoint()
            ctx.provide(key, key)

        apply.__name__ = key
        apply.inject = list(needs)  # type: ignore[attr-defined]
        return apply

    async with Context() as root:
        foo = root.plugin(provider("foo", "qux"))
        bar = root.plugin(provider("bar", "foo", "qux"))
        qux = root.plugin(provider("qux"))
        await root.settle()
        assert [state(f) for f in (foo, bar, qux)] == [FiberState.ACTIVE] * 3
        assert runs == ["qux", "foo", "bar"]


async def test_removing_a_plain_provision_waits_for_dependents() -> None:
    Dependent.log = []

    class Holder:
        config = Value.Config(v=3)

    async with Context() as root:
        d = root.provide("value", Holder())
        dep = await root.plugin(Dependent)
        assert state(dep) is FiberState.ACTIVE
        await d()
        assert state(dep) is FiberState.PENDING
        assert Dependent.log == ["apply 3", "undo-start 3", "undo-end 3"]


async def test_services_provided_while_loading_appear_at_active() -> None:
    gate = anyio.Event()
    provided = anyio.Event()
    applied: list[object] = []

    async def provider(ctx: Context, config: Any) -> None:
        ctx.provide("late", "value")
        provided.set()
        await gate.wait()

    def consumer(ctx: Context, config: Any) -> None:
        applied.append(ctx.late)

    consumer.inject = ["late"]  # type: ignore[attr-defined]
    async with Context() as root:
        prov = root.plugin(provider)
        cons = root.plugin(consumer)
        await provided.wait()
        assert state(cons) is FiberState.PENDING
        gate.set()
        await prov
        await root.settle()
        assert state(cons) is FiberState.ACTIVE
        assert applied == ["value"]


async def test_a_failed_provider_leaves_nothing_behind() -> None:
    def provider(ctx: Context, config: Any) -> None:
        ctx.provide("flaky", 1)
        raise RuntimeError("after providing")

    async with Context() as root:
        fiber = root.plugin(provider)
        with pytest.raises(RuntimeError):
            await fiber
        assert root.get("flaky") is None
        root.provide("flaky", 2)  # the slot is free again
        assert root.flaky == 2


async def test_unloading_dependent_when_its_provider_unloads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[BaseException] = []

    def dependent(ctx: Context, config: Any) -> Callable[[], None]:
        def undo() -> None:
            try:
                ctx.effect(lambda: None)
            except dsh.InactiveContextError as exc:
                seen.append(exc)

        return undo

    dependent.inject = ["value"]  # type: ignore[attr-defined]
    async with Context() as root:
        provider = root.plugin(Value)
        dep = root.plugin(dependent)
        await root.settle()
        await provider.dispose()
        assert state(dep) is FiberState.PENDING
        assert [("unloading" in str(e)) for e in seen] == [True]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


# -- caller attribution --------------------------------------------------------------------


async def test_effects_made_inside_a_service_belong_to_the_caller() -> None:
    owners: list[Fiber] = []

    def user(ctx: Context, config: Any) -> None:
        ctx.registry.register(config)
        ctx.get("registry").register(f"{config}-via-get")
        owners.append(ctx.registry.owner())

    user.inject = ["registry"]  # type: ignore[attr-defined]
    async with Context() as root:
        service = await root.plugin(Registry)
        a = await root.plugin(user, "a")
        b = await root.plugin(user, "b")
        assert root.registry.items == ["a", "a-via-get", "b", "b-via-get"]
        assert owners == [a, b]
        await a.dispose()
        assert root.registry.items == ["b", "b-via-get"]  # undone with the caller
        assert state(service) is FiberState.ACTIVE
        root_item = root.registry.register("root")
        assert root.registry.items == ["b", "b-via-get", "root"]
        await root_item()
        assert root.registry.items == ["b", "b-via-get"]


async def test_state_written_through_a_view_is_the_services_state() -> None:
    async with Context() as root:
        fiber = await root.plugin(Registry)
        view = root.registry
        view.note = "written through a view"
        assert root.registry.note == "written through a view"
        assert fiber.ctx.registry.note == "written through a view"
        assert view is not root.registry  # a view per access; not promised to be one object
        assert view.home_ctx is root.registry.home_ctx


async def test_service_subclass_with_setup_and_its_own_ctx() -> None:
    log: list[object] = []

    class Clock(Service):
        key = "clock"

        def setup(self) -> Callable[[], None]:
            log.append(self.ctx is self.home_ctx)
            return lambda: log.append("stopped")

    async with Context() as root:
        fiber = await root.plugin(Clock)
        assert log == [True]
        await fiber.dispose()
        assert log == [True, "stopped"]


async def test_awaiting_a_dependent_waits_for_a_service_subclass_still_loading() -> None:
    # The provider is started but not awaited: its service does not exist yet when the
    # dependent is awaited, but the provider is a Service subclass that will provide it.
    class Provider(dsh.Service):
        key = "thing"

    class Broken(dsh.Service):
        key = "other"

        def setup(self) -> None:
            raise RuntimeError("no other today")

    class Dependent(dsh.Plugin):
        inject = ("thing",)

    class Stuck(dsh.Plugin):
        inject = ("other",)

    async with dsh.Context() as root:
        provider = root.plugin(Provider)
        dependent = await root.plugin(Dependent)
        assert dependent.state is FiberState.ACTIVE
        assert provider.state is FiberState.ACTIVE
        broken = root.plugin(Broken)
        stuck = await root.plugin(Stuck)
        assert stuck.state is FiberState.PENDING
        assert broken.state is FiberState.FAILED
        await broken.dispose()
        await provider.dispose()
        assert state(dependent) is FiberState.PENDING
        again = await root.plugin(Dependent)
        assert again.state is FiberState.PENDING
