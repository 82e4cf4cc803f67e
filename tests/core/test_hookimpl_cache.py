"""``@hookimpl`` class plugins: pluggy validates a class once, mounts reuse it (RFC 0017)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import dsh
from dsh import Context, FiberState, InvalidPluginError, Plugin
from dsh.testing import state

pytestmark = pytest.mark.anyio


class Specs:
    @dsh.hookspec
    def tick(self, value: object) -> None: ...


class OtherSpecs:
    """Declares the same hook with other arguments."""

    @dsh.hookspec
    def tick(self, other: object) -> None: ...


class Ticker(Plugin):
    heard: ClassVar[list[object]] = []

    @dsh.hookimpl
    def tick(self, value: object) -> None:
        self.heard.append(value)


def count_registers(root: Context) -> list[object]:
    """Record every ``pm.register`` of ``root``'s PluginManager (the pluggy walk)."""
    pm = root.events.pm
    calls: list[object] = []
    register = pm.register

    def spy(plugin: Any, name: str | None = None) -> str | None:
        calls.append(plugin)
        return register(plugin, name)

    pm.register = spy  # type: ignore[method-assign]
    return calls


async def test_a_class_is_validated_by_pluggy_once_and_its_mounts_listen() -> None:
    Ticker.heard = []
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        walks = count_registers(root)
        first = await root.plugin(Ticker)
        second = await root.plugin(Ticker)
        assert len(walks) <= 1  # at most the first mount of the class, ever
        root.emit("tick", 1)
        assert Ticker.heard == [1, 1]
        assert {first.instance, second.instance} <= root.events.pm.get_plugins()
        await first.dispose()
        root.emit("tick", 2)
        assert Ticker.heard == [1, 1, 2]
        assert first.instance not in root.events.pm.get_plugins()
    async with Context() as other:
        other.events.add_hookspecs(Specs)
        walks = count_registers(other)
        await other.plugin(Ticker)  # same hookspec: the class's verdict holds here too
        assert walks == []
        other.emit("tick", 3)
        assert Ticker.heard == [1, 1, 2, 3]


async def test_the_same_hook_from_another_hookspec_is_validated_again() -> None:
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        await root.plugin(Ticker)
    async with Context() as other:
        other.events.add_hookspecs(OtherSpecs)
        walks = count_registers(other)
        fiber = other.plugin(Ticker)
        with pytest.raises(InvalidPluginError, match="value"):
            await fiber
        assert len(walks) == 1
        assert state(fiber) is FiberState.FAILED
        assert other.events.pm.get_plugins() == set()


async def test_an_instance_unregistered_from_pluggy_by_hand_still_disposes() -> None:
    Ticker.heard = []
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        fiber = await root.plugin(Ticker)
        root.events.pm.unregister(fiber.instance)
        await fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
        root.emit("tick", 1)
        assert Ticker.heard == []


class Foreign:
    """An object a third party registered with pluggy directly."""

    @dsh.hookimpl
    def tick(self, value: object) -> None:
        raise AssertionError("dsh dispatch never calls pluggy-registered objects")


async def test_validation_ignores_other_objects_registered_with_pluggy() -> None:
    Ticker.heard = []

    class Fresh(Ticker):
        """A class no runtime validated yet."""

    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.events.pm.register(Foreign())
        await root.plugin(Fresh)
        root.emit("tick", 1)
        assert Ticker.heard == [1]
