"""Optional services: a plugin that uses a service when it is there (``optional``)."""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from dsh import Context, FiberState, InvalidPluginError, Plugin, Service

pytestmark = pytest.mark.anyio


class Clock(Service):
    key = "clock"


class Calendar(Service):
    key = "calendar"


class Watcher(Plugin):
    """Records, at each load, whether the optional clock was there."""

    inject = ("calendar",)
    optional = ("clock",)
    loads: ClassVar[list[bool]] = []

    def setup(self) -> Iterator[Any]:
        type(self).loads.append(self.ctx.get("clock") is not None)
        yield lambda: None


@pytest.fixture(autouse=True)
def fresh_loads() -> None:
    Watcher.loads = []


async def test_activates_without_the_optional_service() -> None:
    async with Context() as root:
        await root.plugin(Calendar)
        fiber = await root.plugin(Watcher)
        assert fiber.state is FiberState.ACTIVE
        assert Watcher.loads == [False]


async def test_a_required_service_still_holds_it_pending() -> None:
    async with Context() as root:
        await root.plugin(Clock)
        fiber = await root.plugin(Watcher)
        assert fiber.state is FiberState.PENDING
        assert Watcher.loads == []
        await root.plugin(Calendar)
        await fiber
        assert Watcher.loads == [True]


async def test_restarts_when_the_optional_service_comes_and_goes() -> None:
    async with Context() as root:
        await root.plugin(Calendar)
        fiber = await root.plugin(Watcher)
        clock = await root.plugin(Clock)
        await fiber
        assert Watcher.loads == [False, True]
        await clock.dispose()
        await fiber
        assert Watcher.loads == [False, True, False]
        assert fiber.state is FiberState.ACTIVE
        first = await root.plugin(Clock)
        await fiber
        await first.restart()  # the clock goes away and comes back
        await fiber
        assert Watcher.loads == [False, True, False, True, False, True]


async def test_a_change_of_an_unrelated_service_does_not_restart() -> None:
    class Other(Service):
        key = "other"

    async with Context() as root:
        await root.plugin(Calendar)
        fiber = await root.plugin(Watcher)
        await root.plugin(Other)
        await fiber
        assert Watcher.loads == [False]


async def test_a_module_plugin_may_name_optional_services() -> None:
    module = types.ModuleType("uses_clock")
    seen: list[bool] = []

    def apply(ctx: Context, config: Any) -> None:
        seen.append(ctx.get("clock") is not None)

    module.apply = apply  # type: ignore[attr-defined]  # a module built at run time
    module.optional = ["clock"]  # type: ignore[attr-defined]  # a module built at run time
    async with Context() as root:
        fiber = await root.plugin(module)
        await root.plugin(Clock)
        await fiber
        await fiber.dispose()
    assert seen == [False, True]


@pytest.mark.parametrize(
    ("inject", "optional", "message"),
    [
        ((), "clock", "optional must be a list of service keys"),
        ((), [1], "optional must be a list of service keys"),
        (("clock",), ("clock",), "'clock' is both in inject and in optional"),
    ],
)
async def test_bad_optional_declarations(inject: Any, optional: Any, message: str) -> None:
    class Bad(Plugin):
        pass

    Bad.inject = inject
    Bad.optional = optional
    async with Context() as root:
        with pytest.raises(InvalidPluginError, match=message):
            root.plugin(Bad)
