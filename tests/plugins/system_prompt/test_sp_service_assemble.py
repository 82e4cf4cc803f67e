"""The ``SystemPrompt`` service on a real runtime: ``assemble()``.

Ordering and evaluation of sections, variables and tool providers, the
``system-prompt/assemble`` waterfall, fresh objects per assembly, and ``tool_order``
applied to what the providers contributed. Scenario numbers refer to ``dsh-core.md`` §9.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

import dsh
from dsh_system_prompt import (
    TOOL_ORDER_REST,
    AssembleContext,
    AssembledSection,
    PromptAssembly,
    PromptRenderError,
    PromptSection,
    ToolOrderError,
    ToolProviderResult,
    ToolSchema,
    render_prompt,
)
from tests.plugins.system_prompt import sp_support
from tests.support import IDENT

pytestmark = pytest.mark.anyio

REST = TOOL_ORDER_REST


# --- helpers -----------------------------------------------------------------------------


def constant(value: str | None) -> Callable[[AssembleContext], str | None]:
    return lambda context: value


# --- ordering and evaluation ----------------------------------------------------------------


async def test_sections_tools_and_variables_of_one_assembly() -> None:
    # Scenario 3.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")
        sp.section(PromptSection(name="cwd", order=20, text=lambda c: "In /srv."))
        sp.section(PromptSection(name="rules", order=10, text="Rules."))
        sp.tools(sp_support.provider("echo"))
        assembly = await sp.assemble()
        assert sp_support.section_names(assembly) == [*sp_support.BUILTINS, "rules", "cwd"]
        assert [s.text for s in assembly.sections[2:]] == ["Rules.", "In /srv."]
        assert [s.order for s in assembly.sections] == [-100, 0, 10, 20]
        assert all(type(s) is AssembledSection for s in assembly.sections)
        assert sp_support.tool_names(assembly) == ["echo"]
        assert assembly.variables == {}
        assert render_prompt(assembly) == f"{IDENT}\n\nP\n\nRules.\n\nIn /srv."


async def test_order_bands_and_ties() -> None:
    # Negative orders render before the persona, below -100 before the identity;
    # equal orders keep registration order (not name order).
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")
        sp.section(PromptSection(name="tie-z", order=150, text="z"))
        sp.section(PromptSection(name="tie-a", order=150, text="a"))
        sp.section(PromptSection(name="first", order=-200, text="f"))
        sp.section(PromptSection(name="pre-persona", order=-0.5, text="p"))
        sp.section(PromptSection(name="tool:bash", order=100, text="b"))
        assembly = await sp.assemble()
        assert sp_support.section_names(assembly) == [
            "first",
            "harness:identity",
            "pre-persona",
            "deployment:persona",
            "tool:bash",
            "tie-z",
            "tie-a",
        ]


async def test_text_function_receives_the_context_and_reruns() -> None:
    # Scenario 4.
    calls: list[AssembleContext] = []

    def text(context: AssembleContext) -> str:
        calls.append(context)
        return f"call {len(calls)} for {context.agent or 'nobody'}"

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="who", order=1, text=text))
        alice = AssembleContext(agent="alice")
        first = await sp.assemble(alice)
        assert first.sections[-1].text == "call 1 for alice"
        assert calls[0] is alice
        second = await sp.assemble()
        assert second.sections[-1].text == "call 2 for nobody"
        assert calls[1] == AssembleContext()


async def test_providers_receive_exactly_one_positional_argument() -> None:
    received: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def text(*args: Any, **kwargs: Any) -> str:
        received.append(("text", args, kwargs))
        return "t"

    def tools(*args: Any, **kwargs: Any) -> ToolProviderResult:
        received.append(("tools", args, kwargs))
        return ToolProviderResult(schemas=[])

    def variable(*args: Any, **kwargs: Any) -> str:
        received.append(("variable", args, kwargs))
        return "v"

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="t", order=1, text=text))
        sp.tools(tools)
        sp.variable("v", variable)
        context = AssembleContext(scope=None, agent="a")
        await sp.assemble(context)
        assert sorted(kind for kind, _, _ in received) == ["text", "tools", "variable"]
        for _, args, kwargs in received:
            assert kwargs == {}
            assert len(args) == 1
            assert args[0] is context
        received.clear()
        await sp.assemble()
        bare = [args[0] for _, args, _ in received]
        assert len(bare) == 3
        assert all(type(c) is AssembleContext for c in bare)
        assert all(c.scope is None and c.agent is None for c in bare)
        assert bare[0] is bare[1] is bare[2]  # one context per assembly


async def test_assemble_none_is_a_bare_assembly() -> None:
    seen: list[AssembleContext] = []
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)

        def record(context: AssembleContext) -> str:
            seen.append(context)
            return "x"

        sp.variable("x", record)
        await sp.assemble(None)
        assert seen == [AssembleContext()]


async def test_variables_follow_their_provider() -> None:
    # Scenario 13.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        d = sp.variable("who", lambda c: None if c.agent is None else str(c.agent))
        assert (await sp.assemble(AssembleContext(agent="alice"))).variables == {"who": "alice"}
        assert (await sp.assemble()).variables == {"who": None}
        await d()
        assert (await sp.assemble()).variables == {}


async def test_variables_keep_registration_order() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        for name in ("zeta", "alpha", "mid"):
            sp.variable(name, constant(name.upper()))
        assert list((await sp.assemble()).variables.items()) == [
            ("zeta", "ZETA"),
            ("alpha", "ALPHA"),
            ("mid", "MID"),
        ]


async def test_variable_registered_while_resolving_is_resolved() -> None:
    # Variables are iterated live: a provider added by another provider during the
    # loop is called in the same assembly.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        added: list[dsh.Disposer] = []

        def first(context: AssembleContext) -> str:
            if not added:
                added.append(sp.variable("late", lambda c: "late value"))
            return "first value"

        sp.variable("first", first)
        assert (await sp.assemble()).variables == {"first": "first value", "late": "late value"}


async def test_tool_provider_added_during_evaluation_joins_next_assembly() -> None:
    # Scenario 12: the provider list is a snapshot.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        added: list[dsh.Disposer] = []

        def first(context: AssembleContext) -> ToolProviderResult:
            if not added:
                added.append(sp.tools(sp_support.provider("late")))
            return ToolProviderResult(schemas=[sp_support.schema("first")])

        sp.tools(first)
        assert sp_support.tool_names(await sp.assemble()) == ["first"]
        assert sp_support.tool_names(await sp.assemble()) == ["first", "late"]


async def test_persona_template_renders_with_variables() -> None:
    # Scenario 15.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="You run on {{model}} in {{cwd}}.")
        sp.variable("model", lambda c: "deepseek-v4")
        sp.variable("cwd", lambda c: "/srv/app")
        assembly = await sp.assemble()
        assert assembly.sections[1].text == "You run on {{model}} in {{cwd}}."  # not yet
        assert render_prompt(assembly) == f"{IDENT}\n\nYou run on deepseek-v4 in /srv/app."


async def test_render_errors_name_the_persona_section() -> None:
    # Scenarios 17 and 18, through the service's own persona section.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="on {{modle}}")
        with pytest.raises(PromptRenderError) as info:
            render_prompt(await sp.assemble())
        assert str(info.value) == (
            'unknown prompt variable "{{modle}}" in section "deployment:persona"; '
            "registered variables: (none)"
        )
        sp.variable("model", lambda c: "m")
        with pytest.raises(PromptRenderError) as info:
            render_prompt(await sp.assemble())
        assert str(info.value).endswith("registered variables: model")
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="in {{cwd}}")
        sp.variable("cwd", lambda c: None)
        with pytest.raises(PromptRenderError) as info:
            render_prompt(await sp.assemble())
        assert str(info.value) == (
            'prompt variable "{{cwd}}" has no value for this assembly '
            '(section "deployment:persona")'
        )


async def test_provider_errors_reach_the_caller() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)

        def broken(context: AssembleContext) -> str:
            raise LookupError("no model yet")

        d = sp.variable("model", broken)
        with pytest.raises(LookupError, match="no model yet"):
            await sp.assemble()
        await d()
        assert (await sp.assemble()).variables == {}


# --- fresh objects per assembly ---------------------------------------------------------------


async def test_mutating_an_assembly_never_leaks_into_the_next() -> None:
    # Scenario 11: names, text, tool description, nested parameters, the lists and dict.
    params: dict[str, Any] = {
        "type": "object",
        "properties": {"x": {"type": "string", "enum": ["a", "b"]}},
    }
    stored = ToolSchema(name="echo", description="Echo.", parameters=params)
    pristine = copy.deepcopy(stored)

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")
        sp.section(PromptSection(name="rules", order=1, text="Rules."))
        sp.variable("model", lambda c: "m")
        sp.tools(lambda c: ToolProviderResult(schemas=[stored]))
        first = await sp.assemble()
        expected = copy.deepcopy(first)
        assert first.tools[0] is not stored
        assert first.tools[0].parameters is not params

        first.sections[0].name = "renamed"
        first.sections[1].text = "changed"
        first.tools[0].description = "changed"
        first.tools[0].parameters["properties"]["x"]["enum"].append("c")
        first.tools[0].parameters["type"] = "array"
        first.sections.append(AssembledSection(name="extra", order=9, text="x"))
        first.tools.clear()
        first.variables["model"] = "changed"
        first.variables["extra"] = "x"

        assert await sp.assemble() == expected
        assert stored == pristine


async def test_listener_mutations_never_leak_into_the_next_assembly() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")
        sp.tools(sp_support.provider("echo"))
        sp.variable("model", lambda c: "m")
        expected = await sp.assemble()
        mutate = [True]

        async def vandal(
            assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
        ) -> PromptAssembly:
            if mutate[0]:
                assembly.sections[1].text = "vandalised"
                assembly.sections.pop(0)
                assembly.tools[0].parameters["type"] = "array"
                assembly.variables.clear()
            return await call_next()

        root.on("system-prompt/assemble", vandal)
        assert (await sp.assemble()).variables == {}
        mutate[0] = False
        assert await sp.assemble() == expected


async def test_tool_schemas_are_copied_to_plain_schemas() -> None:
    # Only name, description and parameters are copied; other fields are dropped.
    @dataclass
    class RichSchema(ToolSchema):
        secret: str = "hidden"

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        rich = RichSchema(name="echo", description="d", parameters={"type": "object"})
        sp.tools(lambda c: ToolProviderResult(schemas=[rich]))
        (tool,) = (await sp.assemble()).tools
        assert type(tool) is ToolSchema
        assert tool == ToolSchema(name="echo", description="d", parameters={"type": "object"})


async def test_non_json_parameter_values_are_still_deep_copied() -> None:
    # JSON-shaped schemas take the fast copy; anything else falls back to deepcopy.
    class Marker:
        def __init__(self) -> None:
            self.seen: list[str] = []

    marker = Marker()
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        schema = ToolSchema(name="echo", description="d", parameters={"x": [marker]})
        sp.tools(lambda c: ToolProviderResult(schemas=[schema]))
        (tool,) = (await sp.assemble()).tools
        copied = tool.parameters["x"][0]
        assert isinstance(copied, Marker)
        assert copied is not marker
        copied.seen.append("mutated")
        assert marker.seen == []


# --- the system-prompt/assemble waterfall ---------------------------------------------------


async def test_waterfall_sees_caller_context_and_earlier_mutations() -> None:
    # Scenario 9.
    seen: dict[str, Any] = {}

    async def listener_a(
        assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
    ) -> PromptAssembly:
        seen["a_context"] = context
        seen["a_assembly"] = assembly
        assembly.sections.append(AssembledSection(name="from-a", order=-1000, text="A"))
        return await call_next()

    async def listener_b(
        assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
    ) -> PromptAssembly:
        seen["b_names"] = sp_support.section_names(assembly)
        seen["b_assembly"] = assembly
        return await call_next()

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="base", order=10, text="Base."))
        root.on("system-prompt/assemble", listener_a)
        root.on("system-prompt/assemble", listener_b)
        context = AssembleContext(agent="alice")
        result = await sp.assemble(context)
        assert seen["a_context"] is context
        assert seen["b_names"] == [*sp_support.BUILTINS, "base", "from-a"]
        assert seen["a_assembly"] is seen["b_assembly"] is result
        # Appended sections are not re-sorted, whatever their order.
        assert sp_support.section_names(result) == [*sp_support.BUILTINS, "base", "from-a"]


async def test_waterfall_appended_tools_are_not_resorted() -> None:
    # Scenario 30: listeners see the sorted list; an appended tool stays last.
    seen: list[list[str]] = []

    async def listener(
        assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
    ) -> PromptAssembly:
        seen.append(sp_support.tool_names(assembly))
        assembly.tools.append(sp_support.schema("aaa"))
        return await call_next()

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.tools(sp_support.provider("zulu", "bravo"))
        root.on("system-prompt/assemble", listener)
        assert sp_support.tool_names(await sp.assemble()) == ["bravo", "zulu", "aaa"]
        assert seen == [["bravo", "zulu"]]


async def test_waterfall_short_circuit_with_empty_assembly() -> None:
    # Scenario 10: the first listener's value wins; later listeners never run.
    later: list[str] = []

    def short(
        assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
    ) -> PromptAssembly:
        return PromptAssembly(sections=[], tools=[], variables={})

    async def never(
        assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
    ) -> PromptAssembly:
        later.append("called")
        return await call_next()

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")
        sp.tools(sp_support.provider("echo"))
        root.on("system-prompt/assemble", short)
        root.on("system-prompt/assemble", never)
        result = await sp.assemble()
        assert result == PromptAssembly(sections=[], tools=[], variables={})
        assert render_prompt(result) == ""
        assert later == []


async def test_waterfall_replacement_is_authoritative() -> None:
    replacement = PromptAssembly(
        sections=[AssembledSection(name="only", order=0, text="Only.")], tools=[], variables={}
    )

    async def replace(
        assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
    ) -> PromptAssembly:
        await call_next()
        return replacement

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        root.on("system-prompt/assemble", replace)
        assert await sp.assemble() is replacement


async def test_waterfall_extra_variable_renders() -> None:
    # Scenario 16.
    async def extra(
        assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
    ) -> PromptAssembly:
        assembly.variables["extra"] = "from a listener"
        return await call_next()

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="Extra: {{extra}}.")
        root.on("system-prompt/assemble", extra)
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nExtra: from a listener."


async def test_waterfall_prepend_runs_first() -> None:
    order: list[str] = []

    def make(tag: str) -> Callable[..., Awaitable[PromptAssembly]]:
        async def listener(
            assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
        ) -> PromptAssembly:
            order.append(tag)
            return await call_next()

        return listener

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        root.on("system-prompt/assemble", make("normal"))
        root.on("system-prompt/assemble", make("prepended"), prepend=True)
        await sp.assemble()
        assert order == ["prepended", "normal"]


async def test_waterfall_listener_error_reaches_the_caller() -> None:
    def broken(
        assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
    ) -> PromptAssembly:
        raise RuntimeError("listener broke")

    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        d = root.on("system-prompt/assemble", broken)
        with pytest.raises(RuntimeError, match="listener broke"):
            await sp.assemble()
        await d()
        assert sp_support.section_names(await sp.assemble()) == sp_support.BUILTINS


# --- tool order through the service -----------------------------------------------------------


async def test_default_tool_order_is_by_name() -> None:
    # Scenario 25: regardless of registration order, across providers.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.tools(sp_support.provider("charlie"))
        sp.tools(sp_support.provider("alpha"))
        sp.tools(sp_support.provider("bravo"))
        assert sp_support.tool_names(await sp.assemble()) == ["alpha", "bravo", "charlie"]


async def test_configured_tool_order() -> None:
    # Scenario 26.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, tool_order=["todo_write", REST, "bash"])
        sp.tools(sp_support.provider("bash", "echo_b"))
        sp.tools(sp_support.provider("todo_write", "echo_a"))
        assert sp_support.tool_names(await sp.assemble()) == [
            "todo_write",
            "echo_a",
            "echo_b",
            "bash",
        ]


async def test_tool_order_naming_unknown_tools_rejects_assemble() -> None:
    # Scenario 27.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(
            root, tool_order=["todo_write", "ghost", REST, "wraith"]
        )
        sp.tools(sp_support.provider("bash", "todo_write"))
        with pytest.raises(ToolOrderError) as info:
            await sp.assemble()
        assert str(info.value) == (
            'tool_order lists unregistered tools "ghost", "wraith"; known tools: bash, todo_write'
        )


async def test_tool_order_with_no_tools_registered() -> None:
    # Scenario 27, second half.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, tool_order=["ghost", REST])
        with pytest.raises(ToolOrderError) as info:
            await sp.assemble()
        assert str(info.value) == 'tool_order lists unregistered tool "ghost"; known tools: (none)'


@pytest.mark.parametrize("tool_order", [None, [REST]])
async def test_reserved_tool_name_rejects_assemble(tool_order: list[str] | None) -> None:
    # Scenario 28.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, tool_order=tool_order)
        d = sp.tools(sp_support.provider("echo", REST))
        with pytest.raises(ToolOrderError) as info:
            await sp.assemble()
        assert str(info.value) == (
            f'tool provider returned reserved tool name "{REST}" '
            "(reserved for tool_order's rest entry)"
        )
        await d()
        assert sp_support.tool_names(await sp.assemble()) == []


async def test_tool_sort_is_stable_across_providers() -> None:
    # Scenario 29.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.tools(lambda c: ToolProviderResult(schemas=[sp_support.schema("dup", "first")]))
        sp.tools(lambda c: ToolProviderResult(schemas=[sp_support.schema("anchor", "anchor")]))
        sp.tools(lambda c: ToolProviderResult(schemas=[sp_support.schema("dup", "second")]))
        assembly = await sp.assemble()
        assert [t.description for t in assembly.tools] == ["anchor", "first", "second"]


async def test_known_names_widen_the_tool_order_universe() -> None:
    # Scenario 38: a known but restricted-away tool is a normal absence.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, tool_order=["bash", REST])
        sp.tools(sp_support.provider("read", known=["read", "bash"]))
        assert sp_support.tool_names(await sp.assemble()) == ["read"]


async def test_known_names_list_in_tool_order_errors() -> None:
    # Scenario 38: a typo lists the whole known universe, from every provider.
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, tool_order=["basj", REST])
        sp.tools(sp_support.provider("read", known=["read", "bash"]))
        sp.tools(sp_support.provider("todo_write"))
        with pytest.raises(ToolOrderError) as info:
            await sp.assemble()
        assert str(info.value) == (
            'tool_order lists unregistered tool "basj"; known tools: bash, read, todo_write'
        )


async def test_empty_known_names_is_not_defaulted() -> None:
    # An explicit empty universe is honoured (only None defaults to the schema names).
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, tool_order=["echo", REST])
        sp.tools(sp_support.provider("echo", known=[]))
        with pytest.raises(ToolOrderError) as info:
            await sp.assemble()
        assert str(info.value) == 'tool_order lists unregistered tool "echo"; known tools: (none)'
