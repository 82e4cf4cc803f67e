"""The root context's lifetime, context basics and the error classes (§3.1, §3.5)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import dsh
from dsh import Context, DshError, FiberState, InactiveContextError
from dsh._errors import EventUsageError
from dsh.testing import state
from tests.core.cancel_support import wait_for_cancel

pytestmark = pytest.mark.anyio


async def test_leaving_the_root_disposes_the_whole_tree_first() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def worker() -> None:
        await wait_for_cancel(started, log, "task cancelled")

    def child(ctx: Context, config: Any) -> Any:
        return lambda: log.append("child")

    def parent(ctx: Context, config: Any) -> Any:
        ctx.plugin(child)
        ctx.task(worker)
        return lambda: log.append("parent")

    async with Context() as root:
        fiber = root.plugin(parent)
        root.effect(lambda: lambda: log.append("root effect"))
        await root.settle()
        await started.wait()
    assert sorted(log) == ["child", "parent", "root effect", "task cancelled"]
    assert state(fiber) is FiberState.DISPOSED
    assert state(root.fiber) is FiberState.DISPOSED
    with pytest.raises(InactiveContextError, match="exited"):
        root.plugin(child)


async def test_an_error_in_the_block_propagates_after_disposal() -> None:
    log: list[str] = []

    async def run() -> None:
        async with Context() as root:
            await root.plugin(lambda ctx, config: lambda: log.append("undone"))
            raise KeyError("body")

    with pytest.raises(KeyError):
        await run()
    assert log == ["undone"]


async def test_a_root_that_is_not_entered_raises_a_clear_error() -> None:
    root = Context()
    for attempt in (
        lambda: root.plugin(lambda ctx, config: None),
        lambda: root.effect(lambda: None),
        lambda: root.provide("x", 1),
        lambda: root.task(anyio.sleep_forever),
        root.fiber.dispose,
    ):
        with pytest.raises(InactiveContextError, match=r"not entered.*async with Context\(\)"):
            attempt()
    assert root.get("x") is None
    async with root:
        fiber = await root.plugin(lambda ctx, config: None)
        assert state(fiber) is FiberState.ACTIVE


async def test_a_root_is_entered_once() -> None:
    root = Context()
    async with root:
        with pytest.raises(DshError, match="only once"):
            async with root:
                pass
        fiber = await root.plugin(lambda ctx, config: None)
        with pytest.raises(DshError, match="fresh root"):
            async with fiber.ctx:
                pass
        assert state(fiber) is FiberState.ACTIVE  # the failed attempts changed nothing
    with pytest.raises(DshError):
        async with root:
            pass


async def test_context_basics() -> None:
    async with Context() as root:
        assert repr(root) == "<Context 'root'>"
        assert root.logger.name == "dsh.root"
        assert root.scope is None
        await root.settle()  # nothing is loading: returns at once

        def named(ctx: Context, config: Any) -> None:
            assert ctx.logger.name == "dsh.named"
            assert repr(ctx) == "<Context 'named'>"
            assert ctx.events is root.events

        fiber = await root.plugin(named)
        assert fiber.ctx.logger is logging.getLogger("dsh.named")


async def test_concurrent_settles_all_return_when_the_tree_is_idle() -> None:
    gate = anyio.Event()
    settled: list[int] = []

    async def apply(ctx: Context, config: Any) -> None:
        await gate.wait()

    async def settle(i: int) -> None:
        await root.settle()
        settled.append(i)

    async with Context() as root:
        fiber = root.plugin(apply)
        async with anyio.create_task_group() as tg:
            tg.start_soon(settle, 1)
            tg.start_soon(settle, 2)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            assert settled == []
            gate.set()
        assert sorted(settled) == [1, 2]
        assert state(fiber) is FiberState.ACTIVE


def test_all_scopes_marker() -> None:
    assert repr(dsh.ALL_SCOPES) == "ALL_SCOPES"


async def test_each_root_has_its_own_event_bus() -> None:
    async with Context() as a, Context() as b:
        assert a.events is not b.events
        assert a.events.pm is not b.events.pm


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "code", "bases"),
    [
        (dsh.DshError, "DSH_ERROR", (Exception,)),
        (dsh.ConfigError, "CONFIG_INVALID", (ValueError,)),
        (dsh.PluginLoadError, "PLUGIN_LOAD", (ImportError,)),
        (dsh.DeploymentError, "DEPLOYMENT_FAILED", (dsh.PluginLoadError,)),
        (dsh.InactiveContextError, "INACTIVE_CONTEXT", (RuntimeError,)),
        (dsh.InvalidEffectError, "INVALID_EFFECT", (TypeError,)),
        (dsh.InvalidPluginError, "INVALID_PLUGIN", (TypeError,)),
        (dsh.ServiceNotFoundError, "SERVICE_MISSING", (AttributeError,)),
        (dsh.ServiceConflictError, "SERVICE_CONFLICT", (RuntimeError,)),
        (dsh.UnknownEventError, "UNKNOWN_EVENT", (LookupError,)),
        (EventUsageError, "EVENT_USAGE", (TypeError,)),
    ],
)
def test_error_classes_have_stable_codes_and_builtin_bases(
    cls: type[DshError], code: str, bases: tuple[type[BaseException], ...]
) -> None:
    assert issubclass(cls, DshError)
    assert cls.code == code
    for base in bases:
        assert issubclass(cls, base)
    err = cls("message")
    assert str(err) == "message"
    assert err.code == code


def test_deployment_error_carries_its_failures() -> None:
    err = dsh.DeploymentError("failed", ["a.yml:1: x", "a.yml:2: y"])
    assert err.failures == ["a.yml:1: x", "a.yml:2: y"]
    assert dsh.DeploymentError("failed").failures == []


def test_the_public_names() -> None:
    for name in (
        "Context",
        "Fiber",
        "FiberState",
        "Plugin",
        "Service",
        "Disposer",
        "hookspec",
        "hookimpl",
        "load_deployment",
        "DshError",
        "ConfigError",
        "PluginLoadError",
        "InactiveContextError",
    ):
        assert name in dsh.__all__
        assert hasattr(dsh, name)


async def test_leaving_the_root_waits_for_a_fiber_another_task_is_unloading() -> None:
    """A fiber that another task is disposing when the root closes is not the root's to
    unwind (it is no longer a child), but the root still waits until its undo is done."""
    log: list[str] = []
    unloading = anyio.Event()
    gate = anyio.Event()

    def plugin(ctx: Context, config: None) -> Any:
        async def undo() -> None:
            unloading.set()
            await gate.wait()
            log.append("undone")

        return undo

    async def dispose(fiber: dsh.Fiber) -> None:
        await fiber.dispose()

    async def release() -> None:
        gate.set()

    async with anyio.create_task_group() as outer:
        async with Context() as root:
            fiber = await root.plugin(plugin)
            outer.start_soon(dispose, fiber)
            await unloading.wait()
            assert state(fiber) is FiberState.UNLOADING
            outer.start_soon(release)
        log.append("root closed")
    assert log == ["undone", "root closed"]
