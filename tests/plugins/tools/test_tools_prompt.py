"""``dsh_tools`` end to end with the real system prompt, scopes, composites and YAML."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

import dsh
from dsh import Context, Disposer, load_deployment
from dsh_scope import create_scope
from dsh_system_prompt import (
    TOOL_ORDER_REST,
    AssembleContext,
    SystemPrompt,
    ToolOrderError,
    render_prompt,
)
from dsh_tools import Tool, ToolCall, ToolResult, Tools

pytestmark = pytest.mark.anyio


class ReadArgs(BaseModel):
    """Read a file."""

    path: str = Field(description="the file to read")


async def answer(args: BaseModel, call: ToolCall) -> str:
    return f"{call.id}: {args.model_dump()}"


def make(name: str, parameters: type[BaseModel] = ReadArgs) -> Tool[Any]:
    return Tool(name=name, description=f"the {name} tool", parameters=parameters, execute=answer)


@asynccontextmanager
async def running(config: dict[str, Any] | None = None) -> AsyncIterator[tuple[Context, Tools]]:
    async with Context() as root:
        await root.plugin(SystemPrompt, config)
        await root.plugin(Tools)
        yield root, root.tools


async def names(root: Context, scope: object = None) -> list[str]:
    assembly = await root.system_prompt.assemble(AssembleContext(scope=scope))
    return [schema.name for schema in assembly.tools]


def registry(tools: Tools) -> object:
    """Everything the registry holds, by identity."""
    return (
        {name: entry.tool for name, entry in tools._global.tools.items()},
        {
            key: (layer.scope, {n: e.tool for n, e in layer.tools.items()}, dict(layer.masks))
            for key, layer in tools._scoped.items()
        },
    )


async def test_schemas_in_lexicographic_order() -> None:
    async with running() as (root, tools):
        for name in ("zulu", "alpha", "mike"):
            tools.register(make(name))
        assembly = await root.system_prompt.assemble()
        assert [schema.name for schema in assembly.tools] == ["alpha", "mike", "zulu"]
        alpha = assembly.tools[0]
        assert alpha.description == "the alpha tool"
        assert alpha.parameters == ReadArgs.model_json_schema()
        assert alpha.parameters["properties"]["path"]["description"] == "the file to read"
        text = render_prompt(assembly)
        assert text.startswith("You are an AI agent powered by dsh.")


async def test_tool_order_config() -> None:
    async with running({"tool_order": ["zulu", TOOL_ORDER_REST]}) as (root, tools):
        for name in ("alpha", "mike", "zulu"):
            tools.register(make(name))
        assert await names(root) == ["zulu", "alpha", "mike"]


async def test_restricted_tools_vanish_for_that_scope_only() -> None:
    config = {"tool_order": ["bash", TOOL_ORDER_REST]}
    async with running(config) as (root, tools):
        for name in ("bash", "read", "todo"):
            tools.register(make(name))
        agent = create_scope(root, "agent")
        create_scope(root, "other")
        hide = agent.ctx.tools.restrict(deny=["bash"])
        # tool_order names "bash", which the agent cannot see: still valid (known).
        assert await names(root, "agent") == ["read", "todo"]
        assert await names(root, "other") == ["bash", "read", "todo"]
        assert await names(root) == ["bash", "read", "todo"]
        only = agent.ctx.tools.restrict(allow=["todo"])
        assert await names(root, "agent") == ["todo"]
        result = await agent.ctx.tools.execute("read", '{"path": "x"}', ToolCall(id="c1"))
        assert result == ToolResult('unknown tool "read"', is_error=True, code="UNKNOWN_TOOL")
        await only()
        await hide()
        assert await names(root, "agent") == ["bash", "read", "todo"]


async def test_tool_order_sees_scoped_names() -> None:
    async with running({"tool_order": ["local", TOOL_ORDER_REST]}) as (root, tools):
        tools.register(make("read"))
        agent = create_scope(root, "agent")
        agent.ctx.tools.register(make("local"))
        assert await names(root, "agent") == ["local", "read"]
        # Globally "local" is unknown, so the same tool_order is an error there.
        with pytest.raises(ToolOrderError, match='unregistered tool "local"; known tools: read'):
            await root.system_prompt.assemble()


async def test_scoped_tools_live_with_their_scope() -> None:
    async with running() as (root, tools):
        tools.register(make("global_tool"))
        scope = create_scope(root, "agent")
        scope.ctx.tools.register(make("scoped_tool"))
        assert await names(root, "agent") == ["global_tool", "scoped_tool"]
        assert await names(root) == ["global_tool"]
        result = await scope.ctx.tools.execute("scoped_tool", '{"path": "p"}', ToolCall(id="c9"))
        assert result == ToolResult(content="c9: {'path': 'p'}")
        await scope.dispose()
        assert await names(root, "agent") == ["global_tool"]
        assert tools._scoped == {}
        # The key can get a new scope, which can register the same name again.
        again = create_scope(root, "agent")
        again.ctx.tools.register(make("scoped_tool"))
        assert await names(root, "agent") == ["global_tool", "scoped_tool"]


async def test_exact_disposer_is_adopted_by_a_composite() -> None:
    async with running() as (root, tools):
        order: list[tuple[str, bool]] = []

        def probe(label: str) -> Any:
            return lambda: order.append((label, "alpha" in tools._global.tools))

        def wiring() -> Iterator[Any]:
            yield probe("first")
            yield tools.register(make("alpha"))
            yield probe("last")

        composite = root.effect(wiring, label="wiring")
        assert await names(root) == ["alpha"]
        await composite()
        # Undone last-in-first-out: "last" still sees the tool, "first" no longer does.
        assert order == [("last", True), ("first", False)]
        assert await names(root) == []


async def test_exact_disposer_ordered_on_fiber_unload() -> None:
    async with running() as (root, tools):
        order: list[tuple[str, bool]] = []
        agent = create_scope(root, "agent")
        tools.register(make("base"))

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
        assert await names(root, "agent") == []
        await fiber.dispose()
        assert order == [("last", True), ("first", False)]
        assert await names(root, "agent") == ["base"]


class Contributor(dsh.Plugin):
    """Registers global and scoped tools and restrictions, in a composite."""

    inject = ("tools",)

    def setup(self) -> Iterator[Disposer]:
        tools = self.ctx.tools
        yield tools.register(make("alpha"))
        yield tools.register(make("beta"))
        scope = create_scope(self.ctx, "helper")
        yield scope.fiber.dispose
        yield scope.ctx.tools.register(make("alpha"))
        yield scope.ctx.tools.restrict(allow=["base", "beta"])


class ScopedContributor(dsh.Plugin):
    """Loaded through an agent's context: everything lands in that agent's layer."""

    inject = ("tools",)

    def setup(self) -> Iterator[Disposer]:
        yield self.ctx.tools.register(make("extra"))
        yield self.ctx.tools.restrict(allow=["alpha", "beta", "base"])
        yield self.ctx.tools.restrict(deny=["base"])


async def test_mount_and_dispose_restores_the_registry() -> None:
    async with running() as (root, tools):
        tools.register(make("base"))
        agent = create_scope(root, "agent")
        agent.ctx.tools.register(make("mine"))
        agent.ctx.tools.restrict(deny=["base"])
        before = registry(tools)
        views = [await names(root, key) for key in (None, "agent", "helper")]
        assert views == [["base"], ["mine"], ["base"]]

        fiber = await root.plugin(Contributor)
        scoped = await agent.ctx.plugin(ScopedContributor)
        assert await names(root) == ["alpha", "base", "beta"]
        assert await names(root, "helper") == ["alpha", "base", "beta"]
        assert await names(root, "agent") == ["alpha", "beta", "extra", "mine"]
        assert registry(tools) != before

        await scoped.dispose()
        await fiber.dispose()
        assert registry(tools) == before
        assert [await names(root, key) for key in (None, "agent", "helper")] == views


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
    (tmp_path / "dsh.yml").write_text(
        textwrap.dedent(
            """
            - id: contrib
              name: ./contrib.py
            - id: tools
              name: tools
            - id: prompt
              name: system-prompt
              config:
                persona: You are a test agent.
            """
        )
    )
    async with Context() as root:
        deployment = await load_deployment(tmp_path / "dsh.yml", root)
        assert await names(root) == ["echo"]
        result = await root.tools.execute("echo", '{"text": "hi"}', ToolCall(id="c1"))
        assert result == ToolResult(content="hi")
        tools = root.tools
        await deployment.dispose()
        assert registry(tools) == ({}, {})
