"""The assembly cache and the compiled render (RFC 0017).

What one scope's assemblies share (the sections merged and sorted, the tool providers,
the ordered tools of one provider result, the render plan) is rebuilt when a
registration changes; values (variables, text functions, tool providers) are called by
every assembly, so a changed value always shows.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

import dsh
from dsh_scope import create_scope
from dsh_system_prompt import (
    AssembleContext,
    AssembledSection,
    PromptAssembly,
    PromptRenderError,
    PromptSection,
    ToolProviderResult,
    read_tools,
    render_prompt,
)
from dsh_system_prompt import _render as render_module
from tests.plugins.system_prompt import sp_support
from tests.plugins.tools.tools_support import make_tool, tools_runtime
from tests.support import IDENT

pytestmark = pytest.mark.anyio


# --- invalidation ----------------------------------------------------------------------------


async def test_a_section_change_shows_in_the_next_assembly() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")
        assert sp_support.section_names(await sp.assemble()) == sp_support.BUILTINS
        added = sp.section(PromptSection(name="rules", order=1, text="Rules."))
        assembly = await sp.assemble()
        assert sp_support.section_names(assembly) == [*sp_support.BUILTINS, "rules"]
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nP\n\nRules."
        await added()
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nP"


async def test_a_tool_provider_change_shows_in_the_next_assembly() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        first = sp.tools(sp_support.provider("read"))
        assert sp_support.tool_names(await sp.assemble()) == ["read"]
        sp.tools(sp_support.provider("bash"))
        assert sp_support.tool_names(await sp.assemble()) == ["bash", "read"]
        await first()
        assert sp_support.tool_names(await sp.assemble()) == ["bash"]


async def test_a_variable_provider_change_shows_in_the_next_assembly() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="on {{model}}")
        with pytest.raises(PromptRenderError, match="unknown prompt variable"):
            render_prompt(await sp.assemble())
        model = sp.variable("model", lambda context: "m1")
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\non m1"
        await model()
        sp.variable("model", lambda context: "m2")
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\non m2"


async def test_a_dynamic_value_shows_at_every_assembly() -> None:
    # Providers are called by every assembly: nothing caches their values.
    counter = iter(range(100))
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="step {{n}}")
        sp.variable("n", lambda context: str(next(counter)))
        sp.section(PromptSection(name="clock", order=1, text=lambda c: f"t{next(counter)}"))
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nstep 0\n\nt1"
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nstep 2\n\nt3"


async def test_a_tool_and_a_restriction_change_show_in_the_next_assembly() -> None:
    async with tools_runtime() as (root, tools):
        sp = root.system_prompt
        agent = create_scope(root, object())
        context = AssembleContext(scope=agent.key)
        tools.register(make_tool("read"))
        assert sp_support.tool_names(await sp.assemble(context)) == ["read"]
        tools.register(make_tool("bash"))
        assert sp_support.tool_names(await sp.assemble(context)) == ["bash", "read"]
        hidden = agent.ctx.tools.restrict(deny=["bash"])
        assert sp_support.tool_names(await sp.assemble(context)) == ["read"]
        assert sp_support.tool_names(await sp.assemble()) == ["bash", "read"]  # the global view
        await hidden()
        assert sp_support.tool_names(await sp.assemble(context)) == ["bash", "read"]


async def test_a_change_in_one_scope_keeps_the_other_views() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        one, two = create_scope(root, "one"), create_scope(root, "two")
        one.ctx.system_prompt.section(PromptSection(name="a", order=1, text="A"))
        two.ctx.system_prompt.section(PromptSection(name="b", order=1, text="B"))
        await sp.assemble(AssembleContext(scope="one"))
        await sp.assemble(AssembleContext(scope="two"))
        view = sp._scoped[id("two")][1].view
        one.ctx.system_prompt.section(PromptSection(name="c", order=2, text="C"))
        assert sp_support.section_names(await sp.assemble(AssembleContext(scope="one"))) == [
            *sp_support.BUILTINS,
            "a",
            "c",
        ]
        await sp.assemble(AssembleContext(scope="two"))
        assert sp._scoped[id("two")][1].view is view  # untouched by scope one's change


# --- the assembly's lists are made on first access ---------------------------------------------


async def cached_assembly(root: dsh.Context) -> PromptAssembly:
    sp = await sp_support.start_system_prompt(root, persona="P {{v}}")
    sp.variable("v", lambda c: "x")
    sp.tools(lambda c: ToolProviderResult(schemas=[sp_support.schema("echo")]))
    return await sp.assemble()


async def test_an_unread_assembly_renders_and_reads_the_same_as_a_plain_one() -> None:
    async with dsh.Context() as root:
        assembly = await cached_assembly(root)
        plain = copy.deepcopy(assembly)
        assert type(plain) is PromptAssembly
        assert render_prompt(assembly) == render_prompt(plain) == f"{IDENT}\n\nP x"
        assert assembly == plain
        assert plain == assembly
        assert assembly.__eq__("something else") is NotImplemented
        assert repr(assembly) == repr(plain)
        assert pickle.loads(pickle.dumps(assembly)) == plain
        assert dataclasses.replace(assembly, tools=[]).tools == []


async def test_the_shared_tools_are_not_the_fresh_copies() -> None:
    async with dsh.Context() as root:
        assembly = await cached_assembly(root)
        shared = read_tools(assembly)
        assert [t.name for t in shared] == ["echo"]
        assert read_tools(assembly) is shared  # no copy while nobody read .tools
        fresh = assembly.tools
        assert fresh == list(shared)
        assert fresh[0] is not shared[0]
        assert fresh[0].parameters is not shared[0].parameters
        assert read_tools(assembly) == tuple(fresh)
        assert read_tools(PromptAssembly(sections=[], tools=fresh, variables={})) == tuple(fresh)


async def test_replacing_the_lists_of_a_cached_assembly() -> None:
    async with dsh.Context() as root:
        assembly = await cached_assembly(root)
        assembly.sections = [AssembledSection(name="only", order=0, text="{{v}}!")]
        assembly.tools = []
        assert render_prompt(assembly) == "x!"
        assert read_tools(assembly) == ()


async def test_extra_attributes_survive_a_copy() -> None:
    async with dsh.Context() as root:
        assembly = await cached_assembly(root)
        assembly.note = "hung on by a plugin"  # type: ignore[attr-defined]
        assert copy.copy(assembly).note == "hung on by a plugin"  # type: ignore[attr-defined]


async def test_a_listener_reading_the_sections_renders_what_it_left() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="P")

        async def edit(
            assembly: PromptAssembly, context: AssembleContext, call_next: sp_support.CallNext
        ) -> PromptAssembly:
            assembly.sections[1].text = "edited"
            return await call_next()

        root.on("system-prompt/assemble", edit)
        assert render_prompt(await sp.assemble()) == f"{IDENT}\n\nedited"


async def test_an_unread_assembly_reports_render_errors_by_section() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root, persona="on {{model}}")
        sp.section(PromptSection(name="late", order=1, text=lambda c: "{{Bad}}"))
        with pytest.raises(PromptRenderError, match='in section "deployment:persona"'):
            render_prompt(await sp.assemble())
        sp.variable("model", lambda c: None)
        with pytest.raises(PromptRenderError, match="has no value"):
            render_prompt(await sp.assemble())


async def test_a_text_function_returning_a_non_string_fails_as_before() -> None:
    async with dsh.Context() as root:
        sp = await sp_support.start_system_prompt(root)
        sp.section(PromptSection(name="odd", order=1, text=lambda c: 42))  # type: ignore[arg-type,return-value]
        with pytest.raises(AttributeError):
            render_prompt(await sp.assemble())


# --- the compiled render ---------------------------------------------------------------------


def plain(*texts: Any, variables: dict[str, Any] | None = None) -> PromptAssembly:
    sections = [AssembledSection(name=f"s{i}", order=i, text=t) for i, t in enumerate(texts)]
    return PromptAssembly(sections=sections, tools=[], variables=dict(variables or {}))


def test_the_same_values_render_the_same_string_again() -> None:
    assembly = plain("a {{x}}", "b", variables={"x": "1"})
    first = render_prompt(assembly)
    assert render_prompt(assembly) is first
    assembly.variables["x"] = "2"
    assert render_prompt(assembly) == "a 2\n\nb"


def test_a_prompt_without_references_renders_as_it_is() -> None:
    assert render_prompt(plain("a", "", "b")) == "a\n\nb"


def test_a_value_that_is_not_a_string_takes_the_section_path() -> None:
    with pytest.raises(TypeError):
        render_prompt(plain("n = {{n}}", variables={"n": 3}))


def test_an_unhashable_text_takes_the_section_path() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        render_prompt(plain(["not", "text"]))


def test_the_plan_cache_is_bounded_and_can_be_cleared() -> None:
    render_module.clear_cache()
    for i in range(300):
        render_prompt(plain(f"text {i} {{{{x}}}}", variables={"x": "y"}))
    assert len(render_module._PLANS) == 256
    render_module.clear_cache()
    assert len(render_module._PLANS) == 0
