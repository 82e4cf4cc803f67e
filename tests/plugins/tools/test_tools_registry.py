"""Registration, validation, restriction and the change event of ``dsh_tools``."""

from __future__ import annotations

import importlib.metadata
from typing import Any, ClassVar

import anyio
import pytest
from pydantic import BaseModel, ConfigDict

import dsh
import dsh_tools
from dsh import (
    ConfigError,
    Context,
    Disposer,
    DshError,
    FiberState,
    InactiveContextError,
)
from dsh.testing import state
from dsh_scope import create_scope
from dsh_system_prompt import AssembleContext, SystemPrompt, ToolProviderResult
from dsh_tools import (
    TOOL_NAME,
    Tool,
    ToolCall,
    ToolRegistrationError,
    ToolRestrictionError,
    ToolResult,
    Tools,
    ToolsSpecs,
    ToolTypeError,
)
from tests.plugins.tools.tools_support import NoArgs, answer, make_tool, tools_runtime

pytestmark = pytest.mark.anyio

GLOBAL_DUPLICATE = (
    'tool "{}" is already registered (for a per-agent variant, register through '
    "that agent's `agent.ctx` instead)"
)
NOT_SCOPED = "tools.restrict() requires a scoped context (agent.ctx)"
NO_OP = (
    "tools.restrict() without allow= and with no names to deny is a no-op; "
    "pass allow=[...] to keep only those global tools or deny=[...] to hide some"
)


def provided(tools: Tools, scope: object = None) -> ToolProviderResult:
    """What the service tells the system prompt for ``scope``."""
    result: ToolProviderResult = tools._provide(AssembleContext(scope=scope))
    return result


def visible(tools: Tools, scope: object = None) -> list[str]:
    return sorted(schema.name for schema in provided(tools, scope).schemas)


def known(tools: Tools, scope: object = None) -> list[str]:
    names = provided(tools, scope).known_names
    assert names is not None
    return sorted(names)


def counter(root: Context) -> list[int]:
    events: list[int] = []
    root.on("tools/change", lambda: events.append(1))
    return events


# -- the package ------------------------------------------------------------------------


def test_exports() -> None:
    assert dsh_tools.plugin is Tools
    assert Tools.key == "tools"
    assert Tools.name == "tools"
    assert tuple(Tools.inject) == ("system_prompt",)
    assert Tools.hookspecs is ToolsSpecs
    for name in dsh_tools.__all__:
        assert hasattr(dsh_tools, name), name
    assert set(dsh_tools.__all__) >= {
        "Tool",
        "ToolCall",
        "ToolResult",
        "Tools",
        "ToolsSpecs",
        "ToolRegistrationError",
        "plugin",
    }


def test_entry_point() -> None:
    (entry,) = importlib.metadata.entry_points(group="dsh.plugins", name="tools")
    assert entry.value == "dsh_tools:Tools"
    assert entry.load() is Tools


def test_error_classes() -> None:
    errors = {
        dsh_tools.ToolRegistrationError: ("TOOL_REGISTRATION", ValueError),
        dsh_tools.ToolTypeError: ("TOOL_TYPE", TypeError),
        dsh_tools.ToolRestrictionError: ("TOOL_RESTRICTION", ValueError),
        dsh_tools.ToolNotFoundError: ("UNKNOWN_TOOL", LookupError),
        dsh_tools.ToolArgumentsError: ("INVALID_ARGS", ValueError),
        dsh_tools.ToolExecutionError: ("TOOL_ERROR", RuntimeError),
    }
    for cls, (code, builtin) in errors.items():
        assert issubclass(cls, DshError)
        assert issubclass(cls, builtin)
        assert cls.code == code


async def test_records() -> None:
    assert ToolResult(content="x") == ToolResult(content="x", is_error=False, code=None)
    call = ToolCall(id="c1")
    assert call.agent is None
    assert call.cancel_scope is None
    assert not call.cancelled
    scope = anyio.CancelScope()
    call = ToolCall(id="c2", agent="agent", cancel_scope=scope)
    assert not call.cancelled
    scope.cancel()
    assert call.cancelled


@pytest.mark.parametrize("name", ["a", "Z", "0", "read_file", "web-fetch", "x" * 64])
def test_name_grammar_accepts(name: str) -> None:
    assert TOOL_NAME.fullmatch(name)


# -- lifecycle of the service -----------------------------------------------------------


async def test_waits_for_the_system_prompt() -> None:
    async with Context() as root:
        fiber = await root.plugin(Tools)
        assert state(fiber) is FiberState.PENDING
        assert root.get("tools") is None
        await root.plugin(SystemPrompt)
        await fiber
        assert state(fiber) is FiberState.ACTIVE
        assert isinstance(root.tools, Tools)


async def test_config_has_no_keys() -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        with pytest.raises(ConfigError, match=r"Extra inputs are not permitted \(at colour\)"):
            await root.plugin(Tools, {"colour": "blue"})
        fiber = await root.plugin(Tools, {})
        assert fiber.state is FiberState.ACTIVE


async def test_provider_is_global_even_from_a_scoped_load() -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.scoped("agent").plugin(Tools)
        root.tools.register(make_tool("alpha"))
        assembly = await root.system_prompt.assemble()
        assert [t.name for t in assembly.tools] == ["alpha"]


async def test_unloads_with_the_system_prompt() -> None:
    async with Context() as root:
        prompt = await root.plugin(SystemPrompt)
        fiber = await root.plugin(Tools)
        await prompt.dispose()
        assert fiber.state is FiberState.PENDING
        assert root.get("tools") is None


async def test_hookimpl_listener() -> None:
    heard: list[str] = []

    class Listener(dsh.Plugin):
        inject = ("tools",)

        @dsh.hookimpl
        def tools_change(self) -> None:
            heard.append("change")

    async with tools_runtime() as (root, tools):
        await root.plugin(Listener)
        d = tools.register(make_tool("alpha"))
        await d()
        assert heard == ["change", "change"]


# -- register ---------------------------------------------------------------------------


async def test_register_returns_the_exact_disposer() -> None:
    async with tools_runtime() as (root, tools):
        events = counter(root)
        d = tools.register(make_tool("alpha"))
        assert type(d) is Disposer
        assert visible(tools) == ["alpha"]
        assert events == [1]
        await d()
        assert visible(tools) == []
        assert events == [1, 1]
        await d()  # a second call starts nothing new
        assert events == [1, 1]


async def test_registration_belongs_to_the_caller() -> None:
    async with tools_runtime() as (root, tools):

        def contributor(ctx: Context, config: None) -> None:
            ctx.tools.register(make_tool("alpha"))

        fiber = await root.plugin(contributor)
        assert visible(tools) == ["alpha"]
        await fiber.dispose()
        assert visible(tools) == []
        assert tools._global.tools == {}


@pytest.mark.parametrize(
    "name", ["", "a b", "x" * 65, "héllo", "dots.are.bad", "trailing\n", "<unlisted-tools>"]
)
async def test_bad_name(name: str) -> None:
    async with tools_runtime() as (root, tools):
        events = counter(root)
        with pytest.raises(ToolRegistrationError) as info:
            tools.register(make_tool(name))
        assert (
            str(info.value) == f'invalid tool name "{name}": it must match ^[a-zA-Z0-9_-]{{1,64}}$'
        )
        assert visible(tools) == []
        assert events == []


def raw_tool(**fields: Any) -> Tool[Any]:
    """A Tool with some fields replaced, bypassing static typing on purpose."""
    values: dict[str, Any] = {
        "name": "read",
        "description": "",
        "parameters": NoArgs,
        "execute": answer,
    }
    values.update(fields)
    return Tool(**values)


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ("read", "tools.register() expects a Tool, got str"),
        (raw_tool(name=3), "tool name must be a string, got int"),
        (raw_tool(description=None), 'tool "read" description must be a string, got NoneType'),
        (
            raw_tool(parameters={"type": "object"}),
            'tool "read" parameters must be a pydantic BaseModel subclass, '
            "got {'type': 'object'}",
        ),
        (
            raw_tool(parameters=dict),
            "tool \"read\" parameters must be a pydantic BaseModel subclass, got <class 'dict'>",
        ),
        (
            raw_tool(parameters=NoArgs()),
            'tool "read" parameters must be a pydantic BaseModel subclass, got NoArgs()',
        ),
        (
            raw_tool(execute="run"),
            'tool "read" execute must be callable as async (args, call), got str',
        ),
        (
            raw_tool(json_schema='{"type": "object"}'),
            'tool "read" json_schema must be a mapping (a JSON Schema object), got str',
        ),
    ],
)
async def test_bad_types(tool: Any, message: str) -> None:
    async with tools_runtime() as (root, tools):
        events = counter(root)
        with pytest.raises(ToolTypeError) as info:
            tools.register(tool)
        assert str(info.value) == message
        assert visible(tools) == []
        assert events == []


async def test_parameters_without_json_schema() -> None:
    class Opaque:
        pass

    class Weird(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        thing: Opaque

    async with tools_runtime() as (root, tools):
        events = counter(root)
        with pytest.raises(ToolRegistrationError) as info:
            tools.register(make_tool("weird", Weird))
        assert str(info.value).startswith('tool "weird" parameters have no JSON Schema: ')
        assert info.value.__cause__ is not None
        assert visible(tools) == []
        assert events == []


async def test_schema_is_computed_once() -> None:
    calls: list[int] = []

    class Counted(BaseModel):
        path: str

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            calls.append(1)
            return super().model_json_schema(*args, **kwargs)

    async with tools_runtime() as (root, tools):
        tools.register(make_tool("read", Counted))
        first = provided(tools).schemas[0].parameters
        assert first == {
            "properties": {"path": {"title": "Path", "type": "string"}},
            "required": ["path"],
            "title": "Counted",
            "type": "object",
            "additionalProperties": False,  # the registry refuses other names
        }
        # The provider hands out its cached schema; each assembly copies it.
        assert provided(tools).schemas[0] is provided(tools).schemas[0]
        assembled = (await root.system_prompt.assemble()).tools[0].parameters
        assembled["properties"]["path"]["type"] = "mutated"
        again = (await root.system_prompt.assemble()).tools[0].parameters
        assert again["properties"]["path"]["type"] == "string"
        assert first["properties"]["path"]["type"] == "string"
        await tools.execute("read", '{"path": "x"}', ToolCall(id="c1"))
        assert calls == [1]


class Forwarded(BaseModel):
    """Whatever object the forwarded schema describes."""

    model_config = ConfigDict(extra="allow")


async def test_a_given_json_schema_is_shown_as_it_is() -> None:
    given = {
        "type": "object",
        "properties": {"q": {"$ref": "#/$defs/Query"}},
        "$defs": {"Query": {"type": "string", "minLength": 1}},
        "required": ["q"],
        "additionalProperties": False,
    }
    seen: list[dict[str, Any] | None] = []

    async def forward(args: Forwarded, call: ToolCall) -> str:
        seen.append(args.model_extra)
        return "ok"

    async with tools_runtime() as (root, tools):
        tools.register(
            Tool(
                name="search",
                description="forwarded",
                parameters=Forwarded,
                execute=forward,
                json_schema=given,
            )
        )
        (schema,) = (await root.system_prompt.assemble()).tools
        assert schema.parameters == given
        assert provided(tools).schemas[0].parameters is not given  # a copy of the mapping
        done = await tools.execute("search", '{"q": {"n": [1, {"a": null}]}}')
        assert done == ToolResult("ok")
        assert seen == [{"q": {"n": [1, {"a": None}]}}]
        refused = await tools.execute("search", "[1]")
        assert (refused.is_error, refused.code) == (True, "INVALID_ARGS")
        # The schema forbids other names (additionalProperties: false): so does the call.
        assert await tools.execute("search", '{"q": "x", "n": 1}') == ToolResult(
            'invalid arguments: unknown argument "n" (search takes: q)', True, "INVALID_ARGS"
        )
        assert len(seen) == 1


async def test_a_given_json_schema_open_to_other_names_takes_them() -> None:
    seen: list[dict[str, Any] | None] = []

    async def forward(args: Forwarded, call: ToolCall) -> str:
        seen.append(args.model_extra)
        return "ok"

    async with tools_runtime() as (_root, tools):
        for name, schema in [
            ("open", {"type": "object", "properties": {"q": {"type": "string"}}}),
            ("any", {"type": "object", "additionalProperties": {"type": "integer"}}),
        ]:
            tools.register(Tool(name, "forwarded", Forwarded, execute=forward, json_schema=schema))
            assert provided(tools).schemas[-1].parameters == schema  # shown as it is
            assert await tools.execute(name, '{"q": "x", "n": 1}') == ToolResult("ok")
        assert seen == [{"q": "x", "n": 1}] * 2


async def test_global_duplicate() -> None:
    async with tools_runtime() as (root, tools):
        first = make_tool("alpha")
        tools.register(first)
        events = counter(root)
        with pytest.raises(ToolRegistrationError) as info:
            tools.register(make_tool("alpha"))
        assert str(info.value) == GLOBAL_DUPLICATE.format("alpha")
        assert events == []
        assert tools._global.tools["alpha"].tool is first


async def test_scoped_duplicate_and_shadowing() -> None:
    async with tools_runtime() as (root, tools):
        tools.register(make_tool("alpha"))
        scope = create_scope(root, "agent")
        scoped = scope.ctx.tools
        local = make_tool("alpha")
        scoped.register(local)  # shadows the global one in this scope only
        with pytest.raises(ToolRegistrationError) as info:
            scoped.register(make_tool("alpha"))
        assert str(info.value) == 'tool "alpha" is already registered in this scope'
        assert tools._scoped[id("agent")].tools["alpha"].tool is local
        assert visible(tools, "agent") == ["alpha"]
        assert known(tools, "agent") == ["alpha"]
        # A second name in a scope, and a global registered after it, are both seen.
        scoped.register(make_tool("beta"))
        tools.register(make_tool("gamma"))
        assert visible(tools, "agent") == ["alpha", "beta", "gamma"]
        assert visible(tools) == ["alpha", "gamma"]
        assert known(tools) == ["alpha", "gamma"]
        assert known(tools, "agent") == ["alpha", "beta", "gamma"]
        await scope.dispose()
        assert tools._scoped == {}
        assert visible(tools, "agent") == ["alpha", "gamma"]


async def test_inactive_context_leaves_nothing() -> None:
    async with tools_runtime() as (root, tools):
        scope = create_scope(root, "agent")
        stale = scope.ctx.tools
        await scope.dispose()
        with pytest.raises(InactiveContextError):
            stale.register(make_tool("alpha"))
        tools.register(make_tool("beta"))
        with pytest.raises(InactiveContextError):
            stale.restrict(deny=["beta"])
        assert tools._scoped == {}
        assert visible(tools, "agent") == ["beta"]


async def test_raising_change_listener_rolls_back() -> None:
    async with tools_runtime() as (root, tools):
        scope = create_scope(root, "agent")
        tools.register(make_tool("base"))
        armed = [True]

        def boom() -> None:
            if armed[0]:
                raise RuntimeError("boom change listener")

        listener = root.on("tools/change", boom)
        with pytest.raises(RuntimeError, match="boom change listener"):
            tools.register(make_tool("alpha"))
        with pytest.raises(RuntimeError, match="boom change listener"):
            scope.ctx.tools.register(make_tool("alpha"))
        with pytest.raises(RuntimeError, match="boom change listener"):
            scope.ctx.tools.restrict(deny=["base"])
        assert visible(tools) == ["base"]
        assert visible(tools, "agent") == ["base"]
        assert tools._scoped == {}
        armed[0] = False
        await listener()
        tools.register(make_tool("alpha"))
        assert visible(tools) == ["alpha", "base"]


# -- restrict ---------------------------------------------------------------------------


async def test_restrict_needs_a_scope() -> None:
    async with tools_runtime() as (root, tools):
        tools.register(make_tool("alpha"))
        events = counter(root)
        with pytest.raises(ToolRestrictionError) as info:
            tools.restrict(deny=["alpha"])
        assert str(info.value) == NOT_SCOPED
        assert events == []


@pytest.mark.parametrize("kwargs", [{}, {"allow": None, "deny": None}, {"deny": []}, {"deny": ()}])
async def test_restrict_noop(kwargs: dict[str, Any]) -> None:
    async with tools_runtime() as (root, tools):
        tools.register(make_tool("alpha"))
        scope = create_scope(root, "agent")
        with pytest.raises(ToolRestrictionError) as info:
            scope.ctx.tools.restrict(**kwargs)
        assert str(info.value) == NO_OP
        assert tools._scoped == {}


async def test_restrict_unknown_names() -> None:
    async with tools_runtime() as (root, tools):
        scope = create_scope(root, "agent")
        restrict = scope.ctx.tools.restrict
        with pytest.raises(ToolRestrictionError) as info:
            restrict(allow=["bash"])
        assert str(info.value) == (
            'tools.restrict() names unknown global tool "bash"; known global tools: (none)'
        )
        tools.register(make_tool("todo"))
        tools.register(make_tool("bash"))
        scope.ctx.tools.register(make_tool("local"))  # not a global tool: cannot be named
        with pytest.raises(ToolRestrictionError) as info:
            restrict(allow=["bash", "ghost"], deny=["local", "ghost"])
        assert str(info.value) == (
            'tools.restrict() names unknown global tools "ghost", "local"; '
            "known global tools: bash, todo"
        )
        assert tools._scoped[id("agent")].masks == {}


async def test_restrict_bad_types() -> None:
    async with tools_runtime() as (root, tools):
        tools.register(make_tool("bash"))
        restrict = create_scope(root, "agent").ctx.tools.restrict
        cases: list[tuple[dict[str, Any], str]] = [
            ({"allow": "bash"}, "tools.restrict() allow= must be a list of tool names, got str"),
            ({"deny": b"bash"}, "tools.restrict() deny= must be a list of tool names, got bytes"),
            ({"deny": 3}, "tools.restrict() deny= must be a list of tool names, got int"),
            (
                {"allow": ["bash", 3]},
                "tools.restrict() allow= must hold tool names (strings), got int 3",
            ),
        ]
        for kwargs, message in cases:
            with pytest.raises(ToolTypeError) as info:
                restrict(**kwargs)
            assert str(info.value) == message
        assert tools._scoped == {}


async def test_restrict_semantics() -> None:
    async with tools_runtime() as (root, tools):
        for name in ("alpha", "beta", "gamma"):
            tools.register(make_tool(name))
        events = counter(root)
        agent = create_scope(root, "agent")
        other = create_scope(root, "other")

        allow = ["alpha", "beta"]
        keep = agent.ctx.tools.restrict(allow=allow)
        allow.append("gamma")  # the names were copied at registration
        assert visible(tools, "agent") == ["alpha", "beta"]
        assert events == [1]

        # Several masks intersect.
        hide = agent.ctx.tools.restrict(deny=["beta"])
        assert visible(tools, "agent") == ["alpha"]
        # The scope's own tools are never masked, even under a masked name.
        agent.ctx.tools.register(make_tool("beta"))
        agent.ctx.tools.register(make_tool("local"))
        assert visible(tools, "agent") == ["alpha", "beta", "local"]
        # Restricted names stay known; other views are untouched.
        assert known(tools, "agent") == ["alpha", "beta", "gamma", "local"]
        assert visible(tools) == ["alpha", "beta", "gamma"]
        assert visible(tools, "other") == ["alpha", "beta", "gamma"]

        # An allow-list hides globals registered later; a deny-list lets them through.
        tools.register(make_tool("delta"))
        assert visible(tools, "agent") == ["alpha", "beta", "local"]
        await keep()
        assert visible(tools, "agent") == ["alpha", "beta", "delta", "gamma", "local"]
        await hide()
        other.ctx.tools.restrict(deny=["alpha"])
        tools.register(make_tool("epsilon"))
        assert visible(tools, "other") == ["beta", "delta", "epsilon", "gamma"]
        assert events == [1, 1, 1, 1, 1, 1, 1, 1, 1]

        # One mask with both lists applies both.
        both = agent.ctx.tools.restrict(allow=["alpha", "gamma"], deny=["gamma"])
        assert visible(tools, "agent") == ["alpha", "beta", "local"]
        await both()
        await agent.dispose()
        await other.dispose()
        assert tools._scoped == {}


async def test_allow_nothing() -> None:
    async with tools_runtime() as (root, tools):
        tools.register(make_tool("alpha"))
        agent = create_scope(root, "agent")
        agent.ctx.tools.restrict(allow=[])
        agent.ctx.tools.register(make_tool("own"))
        assert visible(tools, "agent") == ["own"]
        assert known(tools, "agent") == ["alpha", "own"]


class Owned(dsh.Plugin):
    """Registers a tool from a plugin whose context carries a scope."""

    seen: ClassVar[list[object]] = []

    inject = ("tools",)

    def setup(self) -> Disposer:
        Owned.seen.append(self.ctx.scope)
        disposer: Disposer = self.ctx.tools.register(make_tool("owned"))
        return disposer


async def test_plugin_loaded_through_a_scope_registers_there() -> None:
    async with tools_runtime() as (root, tools):
        scope = create_scope(root, "agent")
        fiber = await scope.ctx.plugin(Owned)
        assert Owned.seen[-1] == "agent"
        assert visible(tools, "agent") == ["owned"]
        assert visible(tools) == []
        await fiber.dispose()
        assert tools._scoped == {}
