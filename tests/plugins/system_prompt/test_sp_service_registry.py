"""The ``SystemPrompt`` service on a real runtime: built-ins, config, registration.

Covers the registration half of the contract: what ``section``/``tools``/``variable``
accept and refuse (synchronously, leaving nothing behind), the exact disposers they
return, the ``system-prompt/change`` events, and the rollback when a change listener
raises. Scenario numbers refer to ``dsh-core.md`` §9.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

import dsh
import dsh_scope
from dsh_system_prompt import (
    HARNESS_IDENTITY,
    TOOL_ORDER_REST,
    PromptAssembly,
    PromptRegistrationError,
    PromptSection,
    PromptTypeError,
    SectionOrderError,
    SystemPrompt,
    SystemPromptConfig,
    ToolOrderError,
    render_prompt,
)
from tests.plugins.system_prompt import sp_support
from tests.support import IDENT

pytestmark = pytest.mark.anyio

GLOBAL_HINT = "register through that agent's `agent.ctx` instead)"

Snapshot = tuple[dict[str, Any], dict[str, Any], dict[object, Any], dict[int, Any]]


# --- helpers -----------------------------------------------------------------------------


def snapshot(sp: SystemPrompt) -> Snapshot:
    """Every layer of the registry, copied deeply enough to compare before/after."""
    g = sp._global
    scoped = {
        k: (key, dict(layer.sections), dict(layer.variables), dict(layer.tools))
        for k, (key, layer) in sp._scoped.items()
    }
    return dict(g.sections), dict(g.variables), dict(g.tools), scoped


def count_changes(ctx: dsh.Context) -> list[tuple[Any, ...]]:
    """Record the positional arguments of every ``system-prompt/change`` event."""
    seen: list[tuple[Any, ...]] = []

    def on_change(*args: Any) -> None:
        seen.append(args)

    ctx.on("system-prompt/change", on_change)
    return seen


def arm_one_shot_failure(ctx: dsh.Context) -> None:
    """A change listener that removes itself, then raises (once)."""
    disposer: list[dsh.Disposer] = []

    def boom() -> None:
        disposer[0]()
        raise RuntimeError("boom change listener")

    disposer.append(ctx.on("system-prompt/change", boom))


Register = Callable[[SystemPrompt], dsh.Disposer]

REGISTRATIONS: dict[str, Register] = {
    "section": lambda sp: sp.section(PromptSection(name="extra", order=5, text="Extra.")),
    "tools": lambda sp: sp.tools(sp_support.provider("echo")),
    "variable": lambda sp: sp.variable("extra", lambda c: "value"),
}


# --- built-ins and config ----------------------------------------------------------------


async def test_builtins_with_persona() -> None:
    # Scenario 1.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="You are dsh.")
        assembly = await sp.assemble()
        assert sp_support.section_names(assembly) == ["harness:identity", "deployment:persona"]
        assert [s.order for s in assembly.sections] == [-100, 0]
        assert assembly.sections[0].text == IDENT == HARNESS_IDENTITY
        assert assembly.tools == []
        assert assembly.variables == {}
        assert render_prompt(assembly) == f"{IDENT}\n\nYou are dsh."


@pytest.mark.parametrize("name", ["deployment:persona", "harness:identity"])
async def test_global_builtin_name_is_taken(name: str) -> None:
    # Scenario 1, second half.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="You are dsh.")
        with pytest.raises(PromptRegistrationError) as info:
            sp.section(PromptSection(name=name, order=0, text="other"))
        assert str(info.value) == (
            f'prompt section "{name}" is already registered (for a per-agent override, '
            + GLOBAL_HINT
        )
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nYou are dsh."


async def test_empty_persona_renders_identity_alone() -> None:
    # Scenario 2: the persona section is still in the assembly, with empty text.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        assembly = await sp.assemble()
        assert sp_support.section_names(assembly) == ["harness:identity", "deployment:persona"]
        assert assembly.sections[1].text == ""
        assert render_prompt(assembly) == IDENT


@pytest.mark.parametrize("config", [{}, None, SystemPromptConfig()])
async def test_direct_construction(config: Any) -> None:
    # Scenario 2, second half: constructing the service directly behaves the same.
    async with dsh.Context() as root:
        sp = SystemPrompt(root, config)
        assert render_prompt(await sp.assemble()) == IDENT
        assert root.get("system_prompt") is not None


async def test_direct_construction_with_persona_config() -> None:
    async with dsh.Context() as root:
        sp = SystemPrompt(root, {"persona": "Persona."})
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nPersona."


async def test_fiber_config_is_validated_model() -> None:
    async with dsh.Context() as root:
        fiber = await root.plugin(SystemPrompt, {"persona": "P", "tool_order": [TOOL_ORDER_REST]})
        assert fiber.state is dsh.FiberState.ACTIVE
        assert fiber.name == "system-prompt"
        assert fiber.config == SystemPromptConfig(persona="P", tool_order=[TOOL_ORDER_REST])


async def test_unknown_config_key_fails_the_fiber() -> None:
    async with dsh.Context() as root:
        fiber = root.plugin(SystemPrompt, {"toolOrder": [TOOL_ORDER_REST]})
        with pytest.raises(dsh.ConfigError, match="system-prompt"):
            await fiber
        assert fiber.state is dsh.FiberState.FAILED
        assert root.get("system_prompt") is None


REST_MISSING = (
    f'tool_order must contain the "{TOOL_ORDER_REST}" rest entry '
    "(where unlisted tools are inserted)"
)


@pytest.mark.parametrize(
    ("tool_order", "message"),
    [
        ([], REST_MISSING),
        (["bash", "todo_write"], REST_MISSING),
        (["bash", "bash", TOOL_ORDER_REST], 'tool_order lists "bash" more than once'),
        (
            [TOOL_ORDER_REST, "bash", TOOL_ORDER_REST],
            f'tool_order lists "{TOOL_ORDER_REST}" more than once',
        ),
    ],
)
async def test_bad_tool_order_fails_at_load(tool_order: list[str], message: str) -> None:
    # Scenario 31.
    async with dsh.Context() as root:
        fiber = root.plugin(SystemPrompt, {"tool_order": tool_order})
        with pytest.raises(ToolOrderError) as info:
            await fiber
        assert str(info.value) == message
        assert fiber.state is dsh.FiberState.FAILED
        assert root.get("system_prompt") is None


async def test_bad_tool_order_fails_direct_construction_synchronously() -> None:
    # Scenario 31: no await is involved, and no service is left provided.
    async with dsh.Context() as root:
        with pytest.raises(ToolOrderError, match="rest entry"):
            SystemPrompt(root, {"tool_order": ["bash"]})
        assert root.get("system_prompt") is None


async def test_tool_order_error_class() -> None:
    async with dsh.Context() as root:
        with pytest.raises(ToolOrderError) as info:
            await root.plugin(SystemPrompt, {"tool_order": []})
        assert isinstance(info.value, dsh.DshError)
        assert isinstance(info.value, ValueError)
        assert info.value.code == "TOOL_ORDER"


# --- bad input is refused synchronously and leaves nothing behind -------------------------


@pytest.mark.parametrize("name", ["", None, 5, b"rules"])
async def test_section_name_must_be_a_non_empty_string(name: Any) -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        changes = count_changes(root)
        expected = PromptRegistrationError if name == "" else PromptTypeError
        with pytest.raises(expected) as info:
            sp.section(PromptSection(name=name, order=1, text="x"))
        assert str(info.value) == f"prompt section name must be a non-empty string, got {name!r}"
        assert snapshot(sp) == before
        assert changes == []


@pytest.mark.parametrize("order", [math.nan, math.inf, -math.inf, True, False, "1", None, 1j, [1]])
async def test_section_order_must_be_finite_number(order: Any) -> None:
    # Scenario 6: NaN (and any other non-finite or non-number) registers nothing.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        changes = count_changes(root)
        with pytest.raises(SectionOrderError) as info:
            sp.section(PromptSection(name="rules", order=order, text="x"))
        assert str(info.value) == 'prompt section "rules" order must be a finite number'
        assert isinstance(info.value, TypeError)
        assert isinstance(info.value, dsh.DshError)
        assert info.value.code == "PROMPT_SECTION_ORDER"
        assert snapshot(sp) == before
        assert changes == []
        # The name is still free.
        sp.section(PromptSection(name="rules", order=1, text="x"))


@pytest.mark.parametrize("order", [0, -5, 7.5, -0.0, 1e300, 2**80])
async def test_finite_orders_are_accepted(order: float) -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="rules", order=order, text="x"))
        assembly = await sp.assemble()
        assert [s.order for s in assembly.sections if s.name == "rules"] == [order]


@pytest.mark.parametrize("text", [None, 5, b"bytes", ["x"]])
async def test_section_text_must_be_string_or_callable(text: Any) -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        with pytest.raises(PromptTypeError) as info:
            sp.section(PromptSection(name="rules", order=1, text=text))
        assert str(info.value) == (
            f'prompt section "rules" text must be a string or a callable, got {type(text).__name__}'
        )
        assert snapshot(sp) == before


async def test_duplicate_section_keeps_the_original() -> None:
    # Scenario 6.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="rules", order=10, text="first"))
        before = snapshot(sp)
        changes = count_changes(root)
        with pytest.raises(PromptRegistrationError) as info:
            sp.section(PromptSection(name="rules", order=20, text="second"))
        assert str(info.value) == (
            'prompt section "rules" is already registered (for a per-agent override, ' + GLOBAL_HINT
        )
        assert snapshot(sp) == before
        assert changes == []
        assembly = await sp.assemble()
        assert [(s.name, s.text) for s in assembly.sections][-1] == ("rules", "first")


@pytest.mark.parametrize("name", ["Not Valid", "Model", "1a", "", "a-b", "_a", "a\n", "é"])
async def test_invalid_variable_name(name: str) -> None:
    # Scenario 14: the name is refused before anything is registered.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        changes = count_changes(root)
        with pytest.raises(PromptRegistrationError) as info:
            sp.variable(name, lambda c: "x")
        assert str(info.value) == (
            f'invalid prompt variable name "{name}" (must match /^[a-z][a-z0-9_]*$/)'
        )
        assert snapshot(sp) == before
        assert changes == []


async def test_non_string_variable_name() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        bad: Any = 5
        with pytest.raises(PromptRegistrationError, match='invalid prompt variable name "5"'):
            sp.variable(bad, lambda c: "x")
        assert snapshot(sp)[1] == {}


async def test_duplicate_variable_keeps_the_original() -> None:
    # Scenario 14.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.variable("model", lambda c: "deepseek-v4")
        before = snapshot(sp)
        changes = count_changes(root)
        with pytest.raises(PromptRegistrationError) as info:
            sp.variable("model", lambda c: "other")
        assert str(info.value) == (
            'prompt variable "model" is already registered (for a per-agent value, ' + GLOBAL_HINT
        )
        assert snapshot(sp) == before
        assert changes == []
        assert (await sp.assemble()).variables == {"model": "deepseek-v4"}


async def test_variable_provider_must_be_callable() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        bad: Any = "deepseek-v4"
        with pytest.raises(PromptTypeError) as info:
            sp.variable("model", bad)
        assert str(info.value) == (
            'the provider of prompt variable "model" must be callable, got str'
        )
        assert snapshot(sp) == before


async def test_tool_provider_must_be_callable() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        bad: Any = [sp_support.schema("echo")]
        with pytest.raises(PromptTypeError) as info:
            sp.tools(bad)
        assert str(info.value) == "a tool provider must be callable, got list"
        assert snapshot(sp) == before


async def test_registration_error_class() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        with pytest.raises(PromptRegistrationError) as info:
            sp.variable("Bad", lambda c: None)
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, dsh.DshError)
        assert info.value.code == "PROMPT_REGISTRATION"


# --- rollback when a change listener raises -----------------------------------------------


@pytest.mark.parametrize("kind", sorted(REGISTRATIONS))
async def test_raising_change_listener_rolls_back(kind: str) -> None:
    # Scenario 7: the error reaches the caller, nothing is left, and a retry registers once.
    register = REGISTRATIONS[kind]
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        changes = count_changes(root)
        arm_one_shot_failure(root)
        with pytest.raises(RuntimeError) as info:
            register(sp)
        assert str(info.value) == "boom change listener"
        assert snapshot(sp) == before
        # The registration was announced, then its rollback was announced.
        assert changes == [(), ()]
        baseline = await sp.assemble()

        register(sp)
        assert len(changes) == 3
        after = await sp.assemble()
        if kind == "section":
            assert sp_support.section_names(after) == [*sp_support.section_names(baseline), "extra"]
        elif kind == "tools":
            assert sp_support.tool_names(after) == ["echo"]
            assert len(sp._global.tools) == 1
        else:
            assert after.variables == {"extra": "value"}


@pytest.mark.parametrize("kind", sorted(REGISTRATIONS))
async def test_raising_change_listener_rolls_back_scoped(kind: str) -> None:
    # The rollback also reclaims the scope layer the registration created.
    register = REGISTRATIONS[kind]
    async with dsh.Context() as root:
        await sp_support.start_system_prompt(root)
        key = object()
        scope = dsh_scope.create_scope(root, key)
        scoped: SystemPrompt = scope.ctx.system_prompt
        arm_one_shot_failure(root)
        with pytest.raises(RuntimeError, match="boom change listener"):
            register(scoped)
        assert scoped._scoped == {}
        register(scoped)
        assert list(scoped._scoped) == [id(key)]
        await scope.dispose()
        assert scoped._scoped == {}


async def test_change_listener_failing_twice_still_rolls_back() -> None:
    # A listener that also fails on the rollback's event: the caller sees the
    # registration's error, and the registration is gone all the same.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)

        def always() -> None:
            raise RuntimeError("always")

        stop = root.on("system-prompt/change", always)
        with pytest.raises(RuntimeError, match="always"):
            sp.section(PromptSection(name="extra", order=1, text="x"))
        assert snapshot(sp) == before
        await stop()


async def test_registration_through_a_disposed_scope_leaves_no_layer() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        scope = dsh_scope.create_scope(root, object())
        scoped: SystemPrompt = scope.ctx.system_prompt
        await scope.dispose()
        before = snapshot(sp)
        for kind, register in REGISTRATIONS.items():
            with pytest.raises(dsh.InactiveContextError):
                register(scoped)
            assert snapshot(sp) == before, kind


# --- change events and the exact disposer -------------------------------------------------


@pytest.mark.parametrize("kind", sorted(REGISTRATIONS))
async def test_change_events_and_direct_disposal(kind: str) -> None:
    # Scenario 8: one event per registration, one per removal, no arguments.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        changes = count_changes(root)
        d = REGISTRATIONS[kind](sp)
        assert changes == [()]
        assert snapshot(sp) != before
        await d()
        assert changes == [(), ()]
        assert snapshot(sp) == before
        await d()  # a second call starts nothing new
        assert changes == [(), ()]


@pytest.mark.parametrize("kind", sorted(REGISTRATIONS))
async def test_registration_returns_exact_disposer(kind: str) -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        d = REGISTRATIONS[kind](sp)
        assert isinstance(d, dsh.Disposer)
        assert type(d) is dsh.Disposer
        assert await d is d  # set up synchronously: awaiting returns at once


@pytest.mark.parametrize("kind", sorted(REGISTRATIONS))
async def test_disposer_call_removes_synchronously(kind: str) -> None:
    # Fire-and-forget: the removal is done before the call returns.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        d = REGISTRATIONS[kind](sp)
        unwind = d()
        assert snapshot(sp) == before
        await unwind


async def test_builtin_registrations_emit_change_events() -> None:
    async with dsh.Context() as root:
        changes = count_changes_before_load(root)
        fiber = await root.plugin(SystemPrompt, {})
        assert changes == [(), ()]  # identity and persona
        await fiber.dispose()
        assert changes == [(), (), (), ()]


def count_changes_before_load(root: dsh.Context) -> list[tuple[Any, ...]]:
    # The hookspecs of a plugin class are declared when it is handed to ctx.plugin;
    # declare them up front so a listener can exist before the service loads.
    root.events.add_hookspecs(SystemPrompt.hookspecs)
    return count_changes(root)


async def test_change_hookimpl_listener() -> None:
    class Watcher(dsh.Plugin):
        inject = ("system_prompt",)
        seen: list[str] = []  # noqa: RUF012 -- per-test class

        @dsh.hookimpl
        def system_prompt_change(self) -> None:
            self.seen.append("change")

        @dsh.hookimpl
        async def system_prompt_assemble(
            self, assembly: PromptAssembly, call_next: Callable[[], Awaitable[PromptAssembly]]
        ) -> PromptAssembly:
            self.seen.append(f"assemble {len(assembly.sections)}")
            return await call_next()

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        watcher = await root.plugin(Watcher)
        d = sp.variable("x", lambda c: "1")
        await sp.assemble()
        await d()
        assert Watcher.seen == ["change", "assemble 2", "change"]
        await watcher.dispose()
        sp.variable("y", lambda c: "1")
        assert Watcher.seen == ["change", "assemble 2", "change"]


# --- composite effects ----------------------------------------------------------------------


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "wrapper"])
async def test_composite_undoes_registrations_at_their_lifo_position(exact: bool) -> None:
    # The returned disposer is the exact one: yielded from a composite effect it is
    # adopted and undone at its position. A wrapper (the bug this convention prevents)
    # leaves each registration a sibling effect, undone before the composite's drain.
    log: list[str] = []

    def adopt(d: dsh.Disposer) -> Callable[[], object]:
        if exact:
            return d

        def wrapper() -> object:
            return d()

        return wrapper

    def apply(ctx: dsh.Context, config: None) -> None:
        sp: SystemPrompt = ctx.system_prompt

        def wiring() -> Iterator[Callable[[], object]]:
            yield lambda: log.append("m1")
            yield adopt(sp.section(PromptSection(name="wired", order=1, text="W")))
            yield lambda: log.append("m2")
            yield adopt(sp.variable("wired", lambda c: "w"))
            yield lambda: log.append("m3")
            yield adopt(sp.tools(sp_support.provider("wired")))

        ctx.effect(wiring, label="wiring")

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        before = snapshot(sp)
        fiber = await root.plugin(apply)

        def present() -> set[str]:
            out = set()
            if "wired" in sp._global.sections:
                out.add("section")
            if "wired" in sp._global.variables:
                out.add("variable")
            if sp._global.tools:
                out.add("tools")
            return out

        state = present()
        assert state == {"section", "variable", "tools"}

        def on_change() -> None:
            nonlocal state
            now = present()
            log.extend(f"-{gone}" for gone in sorted(state - now))
            state = now

        root.on("system-prompt/change", on_change)
        await fiber.dispose()
        if exact:
            assert log == ["-tools", "m3", "-variable", "m2", "-section", "m1"]
        else:
            assert log == ["-tools", "-variable", "-section", "m3", "m2", "m1"]
        assert snapshot(sp) == before


async def test_plugin_setup_generator_adopts_disposers() -> None:
    # The same through a dsh.Plugin whose setup() is the composite effect.
    log: list[str] = []

    class Contributor(dsh.Plugin):
        inject = ("system_prompt",)

        def setup(self) -> Iterator[Callable[[], object]]:
            sp: SystemPrompt = self.ctx.system_prompt
            yield sp.section(PromptSection(name="a", order=1, text="A"))
            yield lambda: log.append("between")
            yield sp.section(PromptSection(name="b", order=2, text="B"))

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        fiber = await root.plugin(Contributor)

        def on_change() -> None:
            log.append(",".join(n for n in ("a", "b") if n in sp._global.sections))

        root.on("system-prompt/change", on_change)
        await fiber.dispose()
        assert log == ["a", "between", ""]


# --- mounting and disposing contributors ----------------------------------------------------


async def test_disposing_a_plugin_removes_everything_it_contributed() -> None:
    # Scenario 5: the built-ins survive.
    class Contributor(dsh.Plugin):
        inject = ("system_prompt",)

        def setup(self) -> Iterator[dsh.Disposer]:
            sp: SystemPrompt = self.ctx.system_prompt
            yield sp.section(PromptSection(name="rules", order=10, text="Rules."))
            yield sp.tools(sp_support.provider("echo"))
            yield sp.variable("model", lambda c: "m")

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")
        baseline = await sp.assemble()
        fiber = await root.plugin(Contributor)
        mounted = await sp.assemble()
        assert sp_support.section_names(mounted) == [
            "harness:identity",
            "deployment:persona",
            "rules",
        ]
        assert sp_support.tool_names(mounted) == ["echo"]
        assert mounted.variables == {"model": "m"}
        await fiber.dispose()
        assert await sp.assemble() == baseline


async def test_mount_then_dispose_restores_every_layer() -> None:
    # ARCHITECTURE §8: a contributor touching the global layer, an existing scope's
    # layer and a scope it creates itself leaves the registry exactly as it found it.
    existing = object()
    own = object()

    def contributor(ctx: dsh.Context, config: None) -> Iterator[dsh.Disposer]:
        sp: SystemPrompt = ctx.system_prompt
        yield sp.section(PromptSection(name="g", order=1, text="G"))
        yield sp.variable("g", lambda c: "g")
        yield sp.tools(sp_support.provider("g"))
        # The plugin's own fiber, registering into the existing scope's layer.
        into_existing: SystemPrompt = ctx.scoped(existing).system_prompt
        yield into_existing.section(PromptSection(name="s", order=2, text="S"))
        yield into_existing.variable("shared", lambda c: "mine")
        # A scope of its own, disposed with the plugin.
        scope = dsh_scope.create_scope(ctx, own)
        in_own: SystemPrompt = scope.ctx.system_prompt
        in_own.section(PromptSection(name="o", order=3, text="O"))
        in_own.tools(sp_support.provider("o"))

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        scope = dsh_scope.create_scope(root, existing)
        kept: SystemPrompt = scope.ctx.system_prompt
        kept.section(PromptSection(name="kept", order=1, text="K"))
        before = snapshot(sp)
        fiber = root.plugin(contributor)
        await fiber
        mounted = snapshot(sp)
        assert set(mounted[0]) == {"harness:identity", "deployment:persona", "g"}
        assert set(mounted[3]) == {id(existing), id(own)}
        assert set(mounted[3][id(existing)][1]) == {"kept", "s"}
        await fiber.dispose()
        assert snapshot(sp) == before
        assert sp._scoped[id(existing)][0] is existing
        await scope.dispose()
        assert sp._scoped == {}


async def test_service_disposal_unloads_its_dependents_first() -> None:
    class Contributor(dsh.Plugin):
        inject = ("system_prompt",)

        def setup(self) -> dsh.Disposer:
            sp: SystemPrompt = self.ctx.system_prompt
            return sp.section(PromptSection(name="rules", order=10, text="R"))

    async with dsh.Context() as root:
        service = await root.plugin(SystemPrompt, {})
        sp: SystemPrompt = root.system_prompt
        contributor = await root.plugin(Contributor)
        assert "rules" in sp._global.sections
        await service.dispose()
        assert contributor.state is dsh.FiberState.PENDING
        assert sp._global.sections == {}


async def test_direct_construction_validates_config_as_config_error() -> None:
    async with dsh.Context() as root:
        with pytest.raises(dsh.ConfigError) as info:
            SystemPrompt(root, {"toolOrder": ["bash"]})
        assert 'invalid config for plugin "system-prompt"' in str(info.value)
        assert "Extra inputs are not permitted (at toolOrder)" in str(info.value)
        assert root.get("system_prompt") is None
