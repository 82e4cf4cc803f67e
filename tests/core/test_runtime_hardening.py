"""The runtime keeps nothing it should not, and keeps the orders it promises."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

import dsh
from dsh import Context, DeploymentError, load_deployment
from dsh._yaml import MAX_CONFIG_VALUES
from dsh.testing import write_deployment

pytestmark = pytest.mark.anyio


async def test_a_plugin_object_is_released_once_no_fiber_runs_it() -> None:
    async with Context() as root:

        def make() -> type[dsh.Plugin]:
            class Temporary(dsh.Plugin):
                pass

            return Temporary

        plugin = make()
        alive = weakref.ref(plugin)
        first = await root.plugin(plugin)
        second = await root.plugin(plugin)
        assert len(root.fiber.runtime.plugin_specs) == 1
        await first.dispose()
        assert len(root.fiber.runtime.plugin_specs) == 1  # still run by the second fiber
        await second.dispose()
        assert root.fiber.runtime.plugin_specs == {}
        del plugin, first, second
        gc.collect()
        assert alive() is None


async def test_a_service_class_made_at_run_time_is_released_with_its_views() -> None:
    async with Context() as root:

        def make() -> type[dsh.Service]:
            class Temporary(dsh.Service):
                key = "temporary"

                @dsh.hookimpl
                def deployment_check(self, report: dsh.CheckReport) -> None:
                    report.ok("fine")

            return Temporary

        plugin = make()
        alive = weakref.ref(plugin)
        fiber = await root.plugin(plugin)
        assert root.temporary.ctx is root  # a view, attributed to the caller
        await fiber.dispose()
        del plugin, fiber
        gc.collect()
        assert alive() is None


async def test_a_pending_plugin_disposed_before_it_ran_is_released_too() -> None:
    async with Context() as root:

        def waits(ctx: Context, config: None) -> None:
            return None

        waits.inject = ["nothing-provides-this"]  # type: ignore[attr-defined]
        fiber = root.plugin(waits)
        assert len(root.fiber.runtime.plugin_specs) == 1
        await fiber.dispose()
        assert root.fiber.runtime.plugin_specs == {}


class Specs:
    @dsh.hookspec
    def ping(self, log: list[str]) -> None: ...


class First(dsh.Plugin):
    @dsh.hookimpl(tryfirst=True)
    def ping(self, log: list[str]) -> None:
        log.append("first (tryfirst)")


class Second(dsh.Plugin):
    @dsh.hookimpl(tryfirst=True)
    def ping(self, log: list[str]) -> None:
        log.append("second (tryfirst)")


class Last(dsh.Plugin):
    @dsh.hookimpl(trylast=True)
    def ping(self, log: list[str]) -> None:
        log.append("last (trylast)")


async def test_try_first_listeners_run_newest_first_before_the_rest() -> None:
    # As in pluggy: among the "first" listeners, the one registered last runs first.
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        await root.plugin(Last)
        root.on("ping", lambda log: log.append("plain"))
        await root.plugin(First)
        await root.plugin(Second)
        root.on("ping", lambda log: log.append("prepended"), prepend=True)
        log: list[str] = []
        root.emit("ping", log)
        assert log == [
            "prepended",
            "second (tryfirst)",
            "first (tryfirst)",
            "plain",
            "last (trylast)",
        ]


def bomb(levels: int, width: int) -> str:
    """A config whose aliases nest ``levels`` deep, each level ``width`` wide."""
    lines = [f"    a0: &a0 [{', '.join(['x'] * width)}]"]
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"    a{level}: &a{level} [{refs}]")
    return "- id: sp\n  name: system-prompt\n  config:\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [7, 9, 30])
async def test_an_alias_bomb_is_refused_with_its_location(tmp_path: Path, levels: int) -> None:
    path = write_deployment(tmp_path, bomb(levels, 9))
    assert len(path.read_bytes()) < 2000 if levels < 30 else True
    async with Context() as root:
        with pytest.raises(DeploymentError) as info:
            await load_deployment(path, root)
    assert info.value.failures == [
        f"{path}:4: entry 'sp': the config holds more than {MAX_CONFIG_VALUES} values once "
        "its aliases are expanded; share less through aliases"
    ]


async def test_aliases_within_the_limit_still_load(tmp_path: Path) -> None:
    text = "- id: sp\n  name: system-prompt\n  config:\n    persona: &p hello\n"
    text += "- id: sp2\n  name: system-prompt\n  disabled: true\n  config: {persona: *p}\n"
    path = write_deployment(tmp_path, text)
    async with Context() as root:
        await load_deployment(path, root)
        assert root.system_prompt.config.persona == "hello"
