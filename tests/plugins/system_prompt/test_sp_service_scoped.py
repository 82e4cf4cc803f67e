"""The ``SystemPrompt`` service with scopes: per-agent layers over the global one.

Registrations made through a scope's context (``dsh_scope.create_scope``; an agent's
``agent.ctx`` is one) land in that scope's layer, shadow same-named global sections and
variables for assemblies with ``AssembleContext(scope=key)``, and go away with the
scope. Scenario numbers refer to ``dsh-core.md`` §9.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import pytest

import dsh
import dsh_scope
from dsh_system_prompt import (
    TOOL_ORDER_REST,
    AssembleContext,
    PromptAssembly,
    PromptRegistrationError,
    PromptSection,
    SystemPrompt,
    ToolOrderError,
    ToolProviderResult,
    render_prompt,
)
from tests.plugins.system_prompt import sp_support
from tests.support import IDENT

pytestmark = pytest.mark.anyio


class Agent:
    """A stand-in scope key (the agent plugin uses its agent handles)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Agent({self.name})"


# --- helpers -----------------------------------------------------------------------------


def open_scope(root: dsh.Context, key: object) -> tuple[dsh_scope.Scope, SystemPrompt]:
    scope = dsh_scope.create_scope(root, key)
    scoped: SystemPrompt = scope.ctx.system_prompt
    return scope, scoped


def section_texts(assembly: PromptAssembly) -> dict[str, str]:
    return {s.name: s.text for s in assembly.sections}


def scoped_context(key: object) -> AssembleContext:
    return AssembleContext(scope=key, agent=key)


# --- shadowing -----------------------------------------------------------------------------


async def test_scoped_persona_shadows_only_in_its_scope() -> None:
    # Scenario 32.
    alice, bob = Agent("alice"), Agent("bob")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="Global persona.")
        _, scoped = open_scope(root, alice)
        open_scope(root, bob)
        scoped.section(PromptSection(name="deployment:persona", order=0, text="Alice persona."))
        mine = await sp.assemble(scoped_context(alice))
        assert sp_support.section_names(mine) == sp_support.BUILTINS
        assert render_prompt(mine) == f"{IDENT}\n\nAlice persona."
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nGlobal persona."
        assert (
            render_prompt(await sp.assemble(scoped_context(bob))) == f"{IDENT}\n\nGlobal persona."
        )


async def test_shadowing_section_takes_its_own_order() -> None:
    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="rules", order=10, text="Global rules."))
        _, scoped = open_scope(root, alice)
        scoped.section(PromptSection(name="rules", order=-200, text="Alice rules."))
        assert sp_support.section_names(await sp.assemble(scoped_context(alice))) == [
            "rules",
            *sp_support.BUILTINS,
        ]
        assert sp_support.section_names(await sp.assemble()) == [*sp_support.BUILTINS, "rules"]


async def test_scope_only_section_disappears_with_the_scope() -> None:
    # Scenario 33.
    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        scope, scoped = open_scope(root, alice)
        scoped.section(PromptSection(name="alice-only", order=5, text="Only Alice."))
        assert sp_support.section_names(await sp.assemble(scoped_context(alice))) == [
            *sp_support.BUILTINS,
            "alice-only",
        ]
        assert sp_support.section_names(await sp.assemble()) == sp_support.BUILTINS
        await scope.dispose()
        assert (
            sp_support.section_names(await sp.assemble(scoped_context(alice)))
            == sp_support.BUILTINS
        )
        assert sp._scoped == {}


async def test_duplicate_errors_by_layer() -> None:
    # Scenario 34: the global error points at agent.ctx, the scoped one at the scope.
    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="rules", order=1, text="g"))
        sp.variable("mode", lambda c: "normal")
        _, scoped = open_scope(root, alice)
        # Shadowing a global name is allowed once per scope...
        scoped.section(PromptSection(name="rules", order=1, text="s"))
        scoped.variable("mode", lambda c: "strict")
        # ...a second time is a duplicate within the scope.
        with pytest.raises(PromptRegistrationError) as info:
            scoped.section(PromptSection(name="rules", order=1, text="again"))
        assert str(info.value) == 'prompt section "rules" is already registered in this scope'
        with pytest.raises(PromptRegistrationError) as info:
            scoped.variable("mode", lambda c: "again")
        assert str(info.value) == 'prompt variable "mode" is already registered in this scope'
        with pytest.raises(PromptRegistrationError) as info:
            sp.section(PromptSection(name="rules", order=1, text="again"))
        assert "`agent.ctx`" in str(info.value)
        with pytest.raises(PromptRegistrationError) as info:
            sp.variable("mode", lambda c: "again")
        assert "`agent.ctx`" in str(info.value)
        assert section_texts(await sp.assemble(scoped_context(alice)))["rules"] == "s"
        assert (await sp.assemble(scoped_context(alice))).variables == {"mode": "strict"}


async def test_shadowed_global_text_function_is_never_called() -> None:
    # Scenario 35.
    calls: list[str] = []

    def global_text(context: AssembleContext) -> str:
        calls.append("global")
        return "global"

    def scoped_text(context: AssembleContext) -> str:
        calls.append("scoped")
        return "scoped"

    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="dynamic", order=1, text=global_text))
        _, scoped = open_scope(root, alice)
        scoped.section(PromptSection(name="dynamic", order=1, text=scoped_text))
        assert section_texts(await sp.assemble(scoped_context(alice)))["dynamic"] == "scoped"
        assert calls == ["scoped"]
        assert section_texts(await sp.assemble())["dynamic"] == "global"
        assert calls == ["scoped", "global"]


async def test_scoped_variable_shadows_global() -> None:
    # Scenario 36.
    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="mode", order=1, text="Mode: {{mode}}."))
        sp.variable("mode", lambda c: "normal")
        _, scoped = open_scope(root, alice)
        scoped.variable("mode", lambda c: "strict")
        assert render_prompt(await sp.assemble(scoped_context(alice))).endswith("\n\nMode: strict.")
        assert render_prompt(await sp.assemble()).endswith("\n\nMode: normal.")


async def test_variable_merge_order_and_shadowed_provider_is_still_called() -> None:
    # Global names keep their position (a shadowing value stays there); scope-only
    # names follow. The shadowed global provider is still called, as in the original.
    calls: list[str] = []

    def record(tag: str, value: str) -> Callable[[AssembleContext], str]:
        def provide(context: AssembleContext) -> str:
            calls.append(tag)
            return value

        return provide

    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.variable("a", record("global a", "ga"))
        sp.variable("b", record("global b", "gb"))
        _, scoped = open_scope(root, alice)
        scoped.variable("c", record("scoped c", "sc"))
        scoped.variable("a", record("scoped a", "sa"))
        variables = (await sp.assemble(scoped_context(alice))).variables
        assert list(variables.items()) == [("a", "sa"), ("b", "gb"), ("c", "sc")]
        assert calls == ["global a", "global b", "scoped c", "scoped a"]


async def test_scoped_tools_join_the_global_ones() -> None:
    # Scenario 37: tools are not shadowed by name; the scoped view is the union.
    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.tools(sp_support.provider("global_tool"))
        scope, scoped = open_scope(root, alice)
        scoped.tools(sp_support.provider("scoped_tool"))
        assert sp_support.tool_names(await sp.assemble(scoped_context(alice))) == [
            "global_tool",
            "scoped_tool",
        ]
        assert sp_support.tool_names(await sp.assemble()) == ["global_tool"]
        await scope.dispose()
        assert sp._scoped == {}
        assert sp_support.tool_names(await sp.assemble(scoped_context(alice))) == ["global_tool"]
        # The same key can open a scope and register again.
        _, again = open_scope(root, alice)
        again.tools(sp_support.provider("scoped_tool"))
        assert sp_support.tool_names(await sp.assemble(scoped_context(alice))) == [
            "global_tool",
            "scoped_tool",
        ]


async def test_same_named_tools_keep_collection_order_global_first() -> None:
    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        _, scoped = open_scope(root, alice)
        scoped.tools(sp_support.provider("echo", description="scoped"))
        sp.tools(sp_support.provider("echo", description="global"))
        tools = (await sp.assemble(scoped_context(alice))).tools
        assert [t.description for t in tools] == ["global", "scoped"]


async def test_scoped_known_names_count_only_in_their_scope() -> None:
    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, tool_order=["bash", TOOL_ORDER_REST])
        _, scoped = open_scope(root, alice)
        scoped.tools(
            lambda c: ToolProviderResult(
                schemas=[sp_support.schema("read")], known_names=["read", "bash"]
            )
        )
        assert sp_support.tool_names(await sp.assemble(scoped_context(alice))) == ["read"]
        with pytest.raises(ToolOrderError) as info:
            await sp.assemble()
        assert str(info.value) == 'tool_order lists unregistered tool "bash"; known tools: (none)'


async def test_scoped_providers_receive_the_scoped_context() -> None:
    alice = Agent("alice")
    received: list[AssembleContext] = []

    def tools(context: AssembleContext) -> ToolProviderResult:
        received.append(context)
        return ToolProviderResult(schemas=[])

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        _, scoped = open_scope(root, alice)
        scoped.tools(tools)
        await sp.assemble()
        assert received == []  # scoped providers serve their scope only
        context = scoped_context(alice)
        await sp.assemble(context)
        assert len(received) == 1
        assert received[0] is context


async def test_unknown_scope_sees_the_global_layer() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")
        assembly = await sp.assemble(scoped_context(Agent("nobody")))
        assert sp_support.section_names(assembly) == sp_support.BUILTINS
        assert sp._scoped == {}  # assembling never creates a layer


# --- scope life cycle ------------------------------------------------------------------------


async def test_removing_the_last_scoped_registration_reclaims_the_layer() -> None:
    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        _, scoped = open_scope(root, alice)
        d1 = scoped.section(PromptSection(name="one", order=1, text="1"))
        d2 = scoped.variable("two", lambda c: "2")
        assert list(sp._scoped) == [id(alice)]
        await d1()
        assert list(sp._scoped) == [id(alice)]
        await d2()
        assert sp._scoped == {}


async def test_plugin_loaded_through_a_scope_contributes_to_it() -> None:
    # A plugin started through a scope's context (as an agent's plugins are) registers
    # into that scope's layer and is disposed with the scope.
    class Contributor(dsh.Plugin):
        inject = ("system_prompt",)

        def setup(self) -> Iterator[dsh.Disposer]:
            sp: SystemPrompt = self.ctx.system_prompt
            yield sp.section(PromptSection(name="deployment:persona", order=0, text="Mine."))
            yield sp.variable("who", lambda c: "alice")

    alice = Agent("alice")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="Global.")
        scope, _ = open_scope(root, alice)
        fiber = await scope.ctx.plugin(Contributor)
        assert dsh_scope.scope_of(fiber.ctx) is alice
        assert render_prompt(await sp.assemble(scoped_context(alice))) == f"{IDENT}\n\nMine."
        assert (await sp.assemble()).variables == {}
        await scope.dispose()
        assert fiber.state is dsh.FiberState.DISPOSED
        assert render_prompt(await sp.assemble(scoped_context(alice))) == f"{IDENT}\n\nGlobal."
        assert sp._scoped == {}


async def test_equal_keys_are_distinct_scopes() -> None:
    first: list[str] = ["agent"]
    second: list[str] = ["agent"]
    assert first == second
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        _, one = open_scope(root, first)
        _, two = open_scope(root, second)
        one.variable("who", lambda c: "first")
        two.variable("who", lambda c: "second")
        assert (await sp.assemble(AssembleContext(scope=first))).variables == {"who": "first"}
        assert (await sp.assemble(AssembleContext(scope=second))).variables == {"who": "second"}
        assert (await sp.assemble(AssembleContext(scope=["agent"]))).variables == {}


# --- the scope-filtered assemble waterfall ---------------------------------------------------


async def test_scoped_assemble_listener_runs_only_for_its_scope() -> None:
    # Scenario 39: exactly once per assembly of its scope, never for others.
    alice, bob = Agent("alice"), Agent("bob")
    runs: list[str] = []

    def recorder(tag: str) -> Callable[..., Awaitable[PromptAssembly]]:
        async def listener(
            assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
        ) -> PromptAssembly:
            runs.append(f"{tag}:{context.scope!r}")
            return await call_next()

        return listener

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        scope, _ = open_scope(root, alice)
        open_scope(root, bob)
        scope.ctx.on("system-prompt/assemble", recorder("alice-listener"))
        root.on("system-prompt/assemble", recorder("global-listener"))

        await sp.assemble()
        assert runs == ["global-listener:None"]
        runs.clear()
        await sp.assemble(scoped_context(alice))
        assert runs == ["alice-listener:Agent(alice)", "global-listener:Agent(alice)"]
        runs.clear()
        await sp.assemble(scoped_context(bob))
        assert runs == ["global-listener:Agent(bob)"]
        runs.clear()
        await sp.assemble(scoped_context(alice))
        assert runs == ["alice-listener:Agent(alice)", "global-listener:Agent(alice)"]
        runs.clear()

        await scope.dispose()
        await sp.assemble(scoped_context(alice))
        assert runs == ["global-listener:Agent(alice)"]


async def test_scoped_listener_can_rewrite_its_scopes_assembly() -> None:
    alice = Agent("alice")

    def silence(
        assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
    ) -> PromptAssembly:
        return PromptAssembly(sections=[], tools=[], variables={})

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")
        scope, _ = open_scope(root, alice)
        scope.ctx.on("system-prompt/assemble", silence)
        assert render_prompt(await sp.assemble(scoped_context(alice))) == ""
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nP"


async def test_change_events_from_scoped_registrations_are_unfiltered() -> None:
    # system-prompt/change is deliberately unfiltered: global and scoped listeners both
    # hear registrations of any layer.
    alice, bob = Agent("alice"), Agent("bob")
    heard: list[str] = []
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        scope_a, scoped_a = open_scope(root, alice)
        scope_b, _ = open_scope(root, bob)
        root.on("system-prompt/change", lambda: heard.append("global"))
        scope_b.ctx.on("system-prompt/change", lambda: heard.append("bob"))
        d = scoped_a.section(PromptSection(name="x", order=1, text="x"))
        assert heard == ["global", "bob"]
        await d()
        assert heard == ["global", "bob", "global", "bob"]
        sp.variable("y", lambda c: "y")
        assert len(heard) == 6
        await scope_a.dispose()
