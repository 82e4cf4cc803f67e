"""The subagent provider registry: the exact disposer of ``register_provider`` (the
discriminating probe), refusals that leave nothing behind, the provider events, and
``list``/``get_provider``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from dsh import ConfigError, Context, Disposer, DuplicateNameError, Plugin, hookimpl
from dsh.testing import capture_logs, errors_logged
from dsh_subagent import (
    DuplicateProviderError,
    SubagentArgumentError,
    SubagentProvider,
    Subagents,
)
from dsh_subagent_spawn import SubagentSpawn
from tests.plugins.subagent_support import StubProvider, subagent_runtime

pytestmark = pytest.mark.anyio


def names(subagents: Subagents) -> list[str]:
    return [provider.name for provider in subagents.list()]


async def registry(root: Context) -> Subagents:
    await root.plugin(Subagents)
    service: Subagents = root.subagents
    return service


def heard(root: Context) -> list[tuple[str, str]]:
    """Every provider event, as ``("added" | "removed", name)``."""
    log: list[tuple[str, str]] = []
    root.on("subagent/provider-added", lambda p: log.append(("added", p.name)))
    root.on("subagent/provider-removed", lambda name: log.append(("removed", name)))
    return log


# -- the exact disposer ----------------------------------------------------------------------


async def test_register_provider_returns_the_exact_disposer() -> None:
    async with Context() as root:
        subagents = await registry(root)
        d = subagents.register_provider(StubProvider("a"))
        assert type(d) is Disposer
        assert d in root.fiber._effects  # the very record of the effect, not a wrapper
        assert await d is d  # set up synchronously
        unwind = d()
        assert names(subagents) == []  # removed before the call returns
        await unwind
        await d()  # a second call starts nothing new
        assert names(subagents) == []


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "wrapper"])
async def test_a_composite_undoes_register_provider_at_its_lifo_position(exact: bool) -> None:
    # The discriminating probe: yielded from a plugin's composite setup, the exact
    # disposer is adopted and undone between its siblings; a wrapper (the bug the
    # convention prevents) leaves the registration a separate effect, undone first.
    log: list[str] = []
    recorded: list[tuple[Disposer, bool]] = []

    class Contributor(Plugin):
        inject = ("subagents",)

        def setup(self) -> Iterator[Callable[[], object]]:
            yield lambda: log.append("first")
            d = self.ctx.subagents.register_provider(StubProvider("a"))
            recorded.append((d, d in self.ctx.fiber._effects))

            def wrapper() -> object:
                return d()

            yield d if exact else wrapper
            yield lambda: log.append("last")

    async with Context() as root:
        subagents = await registry(root)
        root.on("subagent/provider-removed", lambda name: log.append(f"-{name}"))
        fiber = await root.plugin(Contributor)
        d, was_an_effect = recorded[0]
        assert type(d) is Disposer
        assert was_an_effect
        # Adopted by the composite, or left a sibling effect of the fiber.
        assert (d in fiber._effects) is not exact
        assert names(subagents) == ["a"]
        await fiber.dispose()
        assert names(subagents) == []
    if exact:
        assert log == ["last", "-a", "first"]
    else:
        assert log == ["-a", "last", "first"]


async def test_the_disposer_removes_exactly_its_provider() -> None:
    async with Context() as root:
        subagents = await registry(root)
        log = heard(root)
        subagents.register_provider(StubProvider("a"))
        b = subagents.register_provider(StubProvider("b"))
        subagents.register_provider(StubProvider("c"))
        await b()
        assert names(subagents) == ["a", "c"]
        assert log[-1:] == [("removed", "b")]
        assert log.count(("removed", "b")) == 1
        assert len(log) == 4


async def test_unloading_the_registering_plugin_restores_the_registry() -> None:
    async with subagent_runtime(providers=()) as rig:
        root = rig.root
        effects = len(root.fiber._effects)
        event_types = rig.root.sessions.event_types()
        fiber = await root.plugin(SubagentSpawn)
        assert names(rig.subagents) == ["spawn"]
        assert "subagent/descriptor" in root.sessions.event_types()
        await fiber.dispose()
        assert names(rig.subagents) == []
        assert root.sessions.event_types() == event_types
        assert len(root.fiber._effects) == effects


# -- refusals --------------------------------------------------------------------------------


async def test_a_taken_name_is_duplicate_provider_naming_its_holder() -> None:
    async with subagent_runtime(providers=()) as rig:
        holder = await rig.root.plugin(SubagentSpawn)
        kept = rig.subagents.list()
        log = heard(rig.root)
        with pytest.raises(DuplicateProviderError) as caught:
            rig.subagents.register_provider(StubProvider("spawn"))
        error = caught.value
        assert str(error) == (
            'subagent provider "spawn" is already registered by plugin "subagent-spawn"'
        )
        assert error.code == "DUPLICATE_PROVIDER"
        assert isinstance(error, DuplicateNameError)
        assert (error.kind, error.name) == ("subagent provider", "spawn")
        assert error.holder is holder
        assert error.claimant is rig.root.fiber
        assert rig.subagents.list() == kept
        assert log == []


def provider_like(**fields: Any) -> Any:
    """A provider built from ``fields`` (a valid one, with ``fields`` replacing its own;
    a field given as ``...`` is left out)."""
    base: dict[str, Any] = {
        "name": "p",
        "capabilities": frozenset({"persona"}),
        "inherits_parent_context": False,
        "start": lambda request: None,
    }
    base.update(fields)
    return SimpleNamespace(**{k: v for k, v in base.items() if v is not ...})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": ...}, "a subagent provider needs a non-empty string name, got None"),
        ({"name": ""}, "a subagent provider needs a non-empty string name, got ''"),
        ({"name": 3}, "a subagent provider needs a non-empty string name, got 3"),
        (
            {"capabilities": {"persona"}},
            'subagent provider "p": capabilities must be a frozenset of depth_limit, '
            "persona, tool_filter; got {'persona'}",
        ),
        (
            {"capabilities": frozenset({"teleport"})},
            'subagent provider "p": capabilities must be a frozenset of depth_limit, '
            "persona, tool_filter; got frozenset({'teleport'})",
        ),
        (
            {"inherits_parent_context": "yes"},
            'subagent provider "p": inherits_parent_context must be a bool',
        ),
        ({"start": ...}, 'subagent provider "p" has no start(request)'),
        ({"start": "go"}, 'subagent provider "p" has no start(request)'),
    ],
    ids=[
        "no-name",
        "empty-name",
        "name-not-str",
        "capabilities-not-frozenset",
        "unknown-capability",
        "inherits-not-bool",
        "no-start",
        "start-not-callable",
    ],
)
async def test_a_malformed_provider_is_refused_leaving_nothing(
    fields: dict[str, Any], message: str
) -> None:
    async with Context() as root:
        subagents = await registry(root)
        effects = len(root.fiber._effects)
        log = heard(root)
        with pytest.raises(SubagentArgumentError) as caught:
            subagents.register_provider(provider_like(**fields))
        assert str(caught.value) == message
        assert caught.value.code == "INVALID_ARGS"
        assert isinstance(caught.value, ValueError)
        assert names(subagents) == []
        assert log == []
        assert len(root.fiber._effects) == effects + 2  # the two listeners of heard()


async def test_a_provider_shaped_object_is_accepted() -> None:
    async with Context() as root:
        subagents = await registry(root)
        provider: SubagentProvider = provider_like()
        subagents.register_provider(provider)
        assert subagents.get_provider("p") is provider


# -- the provider events ---------------------------------------------------------------------


async def test_a_raising_add_listener_rolls_the_registration_back() -> None:
    async with Context() as root:
        subagents = await registry(root)
        effects = len(root.fiber._effects)

        def veto(provider: SubagentProvider) -> None:
            raise RuntimeError(f"no {provider.name}")

        listening = root.on("subagent/provider-added", veto)
        with pytest.raises(RuntimeError, match=r"^no a$"):
            subagents.register_provider(StubProvider("a"))
        assert names(subagents) == []
        assert len(root.fiber._effects) == effects + 1  # the listener alone
        await listening()
        subagents.register_provider(StubProvider("a"))  # the name is free again
        assert names(subagents) == ["a"]


async def test_remove_listener_errors_are_logged_and_the_removal_happens() -> None:
    async with Context() as root:
        subagents = await registry(root)
        d = subagents.register_provider(StubProvider("a"))
        problem = RuntimeError("listener broke")

        def broken(name: str) -> None:
            raise problem

        root.on("subagent/provider-removed", broken)
        with capture_logs("dsh.subagent") as logs:
            await d()
        assert names(subagents) == []
        [record] = errors_logged(logs)
        assert record.getMessage() == "a listener of subagent/provider-removed failed for 'a'"
        assert record.exc_info is not None
        assert record.exc_info[1] is problem


async def test_provider_events_reach_hookimpl_listeners() -> None:
    log: list[str] = []

    class Watcher(Plugin):
        inject = ("subagents",)

        @hookimpl
        def subagent_provider_added(self, provider: SubagentProvider) -> None:
            log.append(f"+{provider.name}")

        @hookimpl
        def subagent_provider_removed(self, name: str) -> None:
            log.append(f"-{name}")

    async with Context() as root:
        subagents = await registry(root)
        await root.plugin(Watcher)
        d = subagents.register_provider(StubProvider("a"))
        await d()
        assert log == ["+a", "-a"]


# -- list and get_provider -------------------------------------------------------------------


async def test_list_is_in_registration_order_and_get_provider_finds_by_name() -> None:
    async with Context() as root:
        subagents = await registry(root)
        b, a, c = StubProvider("b"), StubProvider("a"), StubProvider("c")
        undo_b = subagents.register_provider(b)
        subagents.register_provider(a)
        subagents.register_provider(c)
        assert subagents.list() == [b, a, c]
        assert subagents.get_provider("a") is a
        assert subagents.get_provider("zzz") is None
        await undo_b()
        subagents.register_provider(b)
        assert subagents.list() == [a, c, b]
        assert subagents.list() is not subagents.list()  # a fresh list each time


async def test_the_plugin_has_no_settings() -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match=r"\(at colour\)"):
            await root.plugin(Subagents, {"colour": "blue"})
