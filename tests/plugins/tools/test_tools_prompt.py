"""``dsh_tools`` end to end with the real system prompt, scopes, composites and YAML."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

import dsh
from dsh import Context, Disposer, load_deployment
from dsh.testing import write_deployment
from dsh_scope import create_scope
from dsh_system_prompt import (
    TOOL_ORDER_REST,
    AssembleContext,
    ToolOrderError,
    render_prompt,
)
from dsh_tools import ToolCall, ToolResult, Tools
from tests.plugins.tools.tools_support import make_tool, tools_runtime

pytestmark = pytest.mark.anyio


class ReadArgs(BaseModel):
    """Read a file."""

    path: str = Field(description="the file to read")


async def assembled_tool_names(root: Context, scope: object = None) -> list[str]:
    assembly = await root.system_prompt.assemble(AssembleContext(scope=scope))
    return [schema.name for schema in assembly.tools]


def registry_contents(tools: Tools) -> object:
    """Everything the registry holds, by identity."""
    return (
        {name: entry.tool for name, entry in tools._global.tools.items()},
        {
            key: (layer.scope, {n: e.tool for n, e in layer.tools.items()}, dict(layer.masks))
            for key, layer in tools._scoped.items()
        },
    )


async def test_schemas_in_lexicographic_order() -> None:
    async with tools_runtime() as (root, tools):
        for name in ("zulu", "alpha", "mike"):
            tools.register(make_tool(name, ReadArgs))
        assembly = await root.system_prompt.assemble()
        assert [schema.name for schema in assembly.tools] == ["alpha", "mike", "zulu"]
        alpha = assembly.tools[0]
        assert alpha.description == "the alpha tool"
        # What the registry refuses, the schema says: no other argument names.
        assert alpha.parameters == {**ReadArgs.model_json_schema(), "additionalProperties": False}
        assert alpha.parameters["properties"]["path"]["description"] == "the file to read"
        text = render_prompt(assembly)
        assert text.startswith("You are an AI agent powered by dsh.")


async def test_tool_order_config() -> None:
    async with tools_runtime({"tool_order": ["zulu", TOOL_ORDER_REST]}) as (root, tools):
        for name in ("alpha", "mike", "zulu"):
            tools.register(make_tool(name, ReadArgs))
        assert await assembled_tool_names(root) == ["zulu", "alpha", "mike"]


async def test_restricted_tools_vanish_for_that_scope_only() -> None:
    config = {"tool_order": ["bash", TOOL_ORDER_REST]}
    async with tools_runtime(config) as (root, tools):
        for name in ("bash", "read", "todo"):
            tools.register(make_tool(name, ReadArgs))
        agent = create_scope(root, "agent")
        create_scope(root, "other")
        hide = agent.ctx.tools.restrict(deny=["bash"])
        # tool_order names "bash", which the agent cannot see: still valid (known).
        assert await assembled_tool_names(root, "agent") == ["read", "todo"]
        assert await assembled_tool_names(root, "other") == ["bash", "read", "todo"]
        assert await assembled_tool_names(root) == ["bash", "read", "todo"]
        only = agent.ctx.tools.restrict(allow=["todo"])
        assert await assembled_tool_names(root, "agent") == ["todo"]
        result = await agent.ctx.tools.execute("read", '{"path": "x"}', ToolCall(id="c1"))
        assert result == ToolResult('unknown tool "read"', is_error=True, code="UNKNOWN_TOOL")
        await only()
        await hide()
        assert await assembled_tool_names(root, "agent") == ["bash", "read", "todo"]


async def test_tool_order_sees_scoped_names() -> None:
    async with tools_runtime({"tool_order": ["local", TOOL_ORDER_REST]}) as (root, tools):
        tools.register(make_tool("read", ReadArgs))
        agent = create_scope(root, "agent")
        agent.ctx.tools.register(make_tool("local", ReadArgs))
        assert await assembled_tool_names(root, "agent") == ["local", "read"]
        # Globally "local" is unknown, so the same tool_order is an error there.
        with pytest.raises(ToolOrderError, match='unregistered tool "local"; known tools: read'):
            await root.system_prompt.assemble()


async def test_scoped_tools_live_with_their_scope() -> None:
    async with tools_runtime() as (root, tools):
        tools.register(make_tool("global_tool", ReadArgs))
        scope = create_scope(root, "agent")
        scope.ctx.tools.register(make_tool("scoped_tool", ReadArgs))
        assert await assembled_tool_names(root, "agent") == ["global_tool", "scoped_tool"]
        assert await assembled_tool_names(root) == ["global_tool"]
        result = await scope.ctx.tools.execute("scoped_tool", '{"path": "p"}', ToolCall(id="c9"))
        assert result == ToolResult(content="c9: {'path': 'p'}")
        await scope.dispose()
        assert await assembled_tool_names(root, "agent") == ["global_tool"]
        assert tools._scoped == {}
        # The key can get a new scope, which can register the same name again.
        again = create_scope(root, "agent")
        again.ctx.tools.register(make_tool("scoped_tool", ReadArgs))
        assert await assembled_tool_names(root, "agent") == ["global_tool", "scoped_tool"]


async def test_exact_disposer_is_adopted_by_a_composite() -> None:
    async with tools_runtime() as (root, tools):
        order: list[tuple[str, bool]] = []

        def probe(label: str) -> Any:
            return lambda: order.append((label, "alpha" in tools._global.tools))

        def wiring() -> Iterator[Any]:
            yield probe("first")
            yield tools.register(make_tool("alpha", ReadArgs))
            yield probe("last")

        composite = root.effect(wiring, label="wiring")
        assert await assembled_tool_names(root) == ["alpha"]
        await composite()
        # Undone last-in-first-out: "last" still sees the tool, "first" no longer does.
        assert order == [("last", True), ("first", False)]
        assert await assembled_tool_names(root) == []


async def test_exact_disposer_ordered_on_fiber_unload() -> None:
    async with tools_runtime() as (root, tools):
        order: list[tuple[str, bool]] = []
        agent = create_scope(root, "agent")
        tools.register(make_tool("base", ReadArgs))

        def probe(label: str) -> Any:
            def check() -> None:
                layer = tools._scoped.get(id("agent"))
                order.append((label, layer is not None and bool(layer.masks)))

            return check

        def contributor(ctx: Context, config: None) -> Iterator[Any]:
            yield probe("first")
            yield agent.ctx.tools.restrict(deny=["base"])
            yield probe("last")

        fiber = await agent.ctx.plugin(contributor)
        assert await assembled_tool_names(root, "agent") == []
        await fiber.dispose()
        assert order == [("last", True), ("first", False)]
        assert await assembled_tool_names(root, "agent") == ["base"]


class Contributor(dsh.Plugin):
    """Registers global and scoped tools and restrictions, in a composite."""

    inject = ("tools",)

    def setup(self) -> Iterator[Disposer]:
        tools = self.ctx.tools
        yield tools.register(make_tool("alpha", ReadArgs))
        yield tools.register(make_tool("beta", ReadArgs))
        scope = create_scope(self.ctx, "helper")
        yield scope.fiber.dispose
        yield scope.ctx.tools.register(make_tool("alpha", ReadArgs))
        yield scope.ctx.tools.restrict(allow=["base", "beta"])


class ScopedContributor(dsh.Plugin):
    """Loaded through an agent's context: everything lands in that agent's layer."""

    inject = ("tools",)

    def setup(self) -> Iterator[Disposer]:
        yield self.ctx.tools.register(make_tool("extra", ReadArgs))
        yield self.ctx.tools.restrict(allow=["alpha", "beta", "base"])
        yield self.ctx.tools.restrict(deny=["base"])


async def test_mount_and_dispose_restores_the_registry() -> None:
    async with tools_runtime() as (root, tools):
        tools.register(make_tool("base", ReadArgs))
        agent = create_scope(root, "agent")
        agent.ctx.tools.register(make_tool("mine", ReadArgs))
        agent.ctx.tools.restrict(deny=["base"])
        before = registry_contents(tools)
        views = [await assembled_tool_names(root, key) for key in (None, "agent", "helper")]
        assert views == [["base"], ["mine"], ["base"]]

        fiber = await root.plugin(Contributor)
        scoped = await agent.ctx.plugin(ScopedContributor)
        assert await assembled_tool_names(root) == ["alpha", "base", "beta"]
        assert await assembled_tool_names(root, "helper") == ["alpha", "base", "beta"]
        assert await assembled_tool_names(root, "agent") == ["alpha", "beta", "extra", "mine"]
        assert registry_contents(tools) != before

        await scoped.dispose()
        await fiber.dispose()
        assert registry_contents(tools) == before
        assert [await assembled_tool_names(root, key) for key in (None, "agent", "helper")] == views


async def test_deployment(tmp_path: Path) -> None:
    (tmp_path / "contrib.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel

            from dsh_tools import Tool

            inject = ["tools"]


            class Args(BaseModel):
                text: str


            async def echo(args, call):
                return args.text


            def apply(ctx, config):
                return ctx.tools.register(
                    Tool(name="echo", description="Echo text.", parameters=Args, execute=echo)
                )
            """
        )
    )
    path = write_deployment(
        tmp_path,
        """
        - id: contrib
          name: ./contrib.py
        - id: tools
          name: tools
        - id: prompt
          name: system-prompt
          config:
            persona: You are a test agent.
        """,
    )
    async with Context() as root:
        deployment = await load_deployment(path, root)
        assert await assembled_tool_names(root) == ["echo"]
        result = await root.tools.execute("echo", '{"text": "hi"}', ToolCall(id="c1"))
        assert result == ToolResult(content="hi")
        tools = root.tools
        await deployment.dispose()
        assert registry_contents(tools) == ({}, {})
