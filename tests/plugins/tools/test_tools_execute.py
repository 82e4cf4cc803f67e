"""``Tools.execute``: resolution, argument validation, error results, cancellation."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import (
    AliasChoices,
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    field_validator,
)

from dsh import DshError
from dsh_scope import create_scope
from dsh_system_prompt import AssembleContext
from dsh_tools import (
    Tool,
    ToolArgumentsError,
    ToolCall,
    ToolRestrictionError,
    ToolResult,
    ToolTypeError,
)
from tests.plugins.tools.tools_support import NoArgs, make_tool, tools_runtime

pytestmark = pytest.mark.anyio


class ReadArgs(BaseModel):
    path: str
    limit: int = 100


class Options(BaseModel):
    depth: int


class NestedArgs(BaseModel):
    items: list[int] = []
    options: Options | None = None


class Defaults(BaseModel):
    greeting: str = "hello"


class Crashing(BaseModel):
    value: str

    @field_validator("value")
    @classmethod
    def crash(cls, value: str) -> str:
        raise RuntimeError(f"validator crashed on {value}")


class Recorder:
    """A tool body that records what it received and returns a fixed answer."""

    def __init__(self, answer: object = "done") -> None:
        self.answer = answer
        self.calls: list[tuple[BaseModel, ToolCall]] = []

    async def __call__(self, args: BaseModel, call: ToolCall) -> Any:
        self.calls.append((args, call))
        return self.answer


def error(content: str, code: str) -> ToolResult:
    return ToolResult(content=content, is_error=True, code=code)


async def test_string_result_and_call() -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder("file contents")
        tools.register(make_tool("read", ReadArgs, execute=body))
        call = ToolCall(id="call-1", agent="agent-handle")
        result = await tools.execute("read", '{"path": "a.txt", "limit": 5}', call)
        assert result == ToolResult(content="file contents")
        ((args, seen),) = body.calls
        assert args == ReadArgs(path="a.txt", limit=5)
        assert seen is call


async def test_tool_result_passes_through() -> None:
    async with tools_runtime() as (_root, tools):
        answer = ToolResult(content="partial", is_error=True, code="MY_CODE")
        tools.register(make_tool("read", ReadArgs, execute=Recorder(answer)))
        result = await tools.execute("read", {"path": "a"}, ToolCall(id="c1"))
        assert result is answer


async def test_the_call_is_optional() -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder("ok")
        tools.register(make_tool("read", ReadArgs, execute=body))
        assert await tools.execute("read", {"path": "a"}) == ToolResult(content="ok")
        ((_args, seen),) = body.calls
        assert seen == ToolCall(id="")


@pytest.mark.parametrize("arguments", ["", "   ", "{}", {}])
async def test_empty_arguments(arguments: str | dict[str, Any]) -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder()
        tools.register(make_tool("greet", Defaults, execute=body))
        assert await tools.execute("greet", arguments, ToolCall(id="c1")) == ToolResult("done")
        assert body.calls[0][0] == Defaults()


async def test_dict_arguments_are_not_mutated() -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder()
        tools.register(make_tool("read", ReadArgs, execute=body))
        arguments = {"path": "a", "limit": "7"}
        await tools.execute("read", arguments, ToolCall(id="c1"))
        assert body.calls[0][0] == ReadArgs(path="a", limit=7)
        assert arguments == {"path": "a", "limit": "7"}


@pytest.mark.parametrize(
    ("arguments", "content"),
    [
        (
            '{"limit": "many"}',
            "invalid arguments: path: Field required; "
            "limit: Input should be a valid integer, unable to parse string as an integer",
        ),
        ({"path": 3}, "invalid arguments: path: Input should be a valid string"),
        ("[1, 2]", "invalid arguments: Input should be an object"),
        ('"path"', "invalid arguments: Input should be an object"),
        (["path"], "invalid arguments: arguments must be a JSON object string or a dict, got list"),
        (None, "invalid arguments: arguments must be a JSON object string or a dict, got NoneType"),
    ],
)
async def test_invalid_arguments(arguments: Any, content: str) -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder()
        tools.register(make_tool("read", ReadArgs, execute=body))
        result = await tools.execute("read", arguments, ToolCall(id="c1"))
        assert result == error(content, "INVALID_ARGS")
        assert body.calls == []  # validated before the body runs


async def test_invalid_json() -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder()
        tools.register(make_tool("read", ReadArgs, execute=body))
        result = await tools.execute("read", '{"path": ', ToolCall(id="c1"))
        assert result.is_error
        assert result.code == ToolArgumentsError.code
        assert result.content.startswith("invalid arguments: Invalid JSON: ")
        assert body.calls == []


async def test_nested_locations() -> None:
    async with tools_runtime() as (_root, tools):
        tools.register(make_tool("nested", NestedArgs, execute=Recorder()))
        result = await tools.execute(
            "nested", '{"items": [1, "x", 3], "options": {"depth": []}}', ToolCall(id="c1")
        )
        assert result == error(
            "invalid arguments: items[1]: Input should be a valid integer, unable to parse "
            "string as an integer; options.depth: Input should be a valid integer",
            "INVALID_ARGS",
        )


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    options: Options | None = None


class Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")

    path: str


class Aliased(BaseModel):
    path: str = Field(alias="file")
    mode: str = Field(default="r", validation_alias=AliasChoices("mode", "how"))
    depth: int = Field(default=0, validation_alias=AliasPath("opts", 0))


class ByName(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    path: str = Field(alias="file")
    mode: str = Field(default="r", validation_alias="how")


class ByNameOnly(BaseModel):
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=False)

    path: str = Field(alias="file")


class StrictPath(BaseModel):
    """Its schema shows ``depth``; it validates from ``opts[0]`` only."""

    model_config = ConfigDict(extra="forbid")

    depth: int = Field(default=0, validation_alias=AliasPath("opts", 0))


class StrictOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: int = 0


class Deep(BaseModel):
    options: StrictOptions = StrictOptions()


@pytest.mark.parametrize(
    ("model", "arguments", "content"),
    [
        # pydantic's default (extra="ignore") would drop them: the registry refuses them.
        (ReadArgs, '{"path": "a", "foo": 1}', 'unknown argument "foo" (read takes: path, limit)'),
        (ReadArgs, {"path": "a", "foo": 1, "bar": 2}, 'unknown arguments "foo", "bar" (read '),
        (NoArgs, '{"foo": 1}', 'unknown argument "foo" (read takes no arguments)'),
        # With other problems: the names first, then the model's.
        (ReadArgs, '{"file": "a"}', 'unknown argument "file" (read takes: path, limit); path: '),
        # extra="forbid": the same words, once.
        (Strict, '{"path": "a", "foo": 1}', 'unknown argument "foo" (read takes: path, options)'),
        (Strict, {"foo": 1}, 'unknown argument "foo" (read takes: path, options); path: Field'),
        (StrictPath, {"depth": 1}, 'unknown argument "depth" (read takes: depth)'),
        # A nested model that forbids other keys names the key where it is.
        (Deep, '{"options": {"depht": 2}}', 'options: unknown key "depht"'),
        (Aliased, {"file": "a", "x": 1}, 'unknown argument "x" (read takes: file, mode, depth)'),
        # A field's own name is not taken when it has an alias (pydantic would drop it).
        (Aliased, {"file": "a", "path": "b"}, 'unknown argument "path" (read takes: file, '),
    ],
)
async def test_an_argument_the_tool_does_not_take_is_refused(
    model: type[BaseModel], arguments: Any, content: str
) -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder()
        tools.register(make_tool("read", model, execute=body))
        result = await tools.execute("read", arguments, ToolCall(id="c1"))
        assert (result.is_error, result.code) == (True, "INVALID_ARGS")
        assert result.content.startswith(f"invalid arguments: {content}")
        assert body.calls == []


async def test_names_a_tool_takes_are_its_fields_aliases_and_any_it_allows() -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder()
        tools.register(make_tool("aliased", Aliased, execute=body))
        tools.register(make_tool("lenient", Lenient, execute=body))
        tools.register(make_tool("by-name", ByName, execute=body))
        tools.register(make_tool("by-name-only", ByNameOnly, execute=body))
        tools.register(make_tool("root", RootModel[dict[str, int]], execute=body))
        given = {"file": "a", "how": "w", "opts": [3], "mode": "x", "depth": 1}
        assert await tools.execute("aliased", given) == ToolResult("done")
        assert await tools.execute("lenient", '{"path": "a", "more": 1}') == ToolResult("done")
        assert await tools.execute("by-name", {"path": "a", "mode": "w"}) == ToolResult("done")
        assert await tools.execute("by-name", {"file": "b", "how": "x"}) == ToolResult("done")
        assert await tools.execute("by-name-only", {"path": "a"}) == ToolResult("done")
        refused = await tools.execute("by-name-only", {"path": "a", "file": "b"})
        assert refused.content.startswith('invalid arguments: unknown argument "file"')
        assert await tools.execute("root", '{"any": 1, "name": 2}') == ToolResult("done")
        assert [args for args, _ in body.calls] == [
            Aliased.model_validate({"file": "a", "mode": "x", "opts": [3]}),
            Lenient.model_validate({"path": "a", "more": 1}),
            ByName.model_validate({"path": "a", "mode": "w"}),
            ByName.model_validate({"path": "b", "mode": "x"}),
            ByNameOnly.model_validate({"path": "a"}),
            RootModel[dict[str, int]]({"any": 1, "name": 2}),
        ]
        # Not an object, not JSON, nested too deeply: the model's validation says so.
        for broken in ("[1]", '{"path": ', "[" * 100_000 + "]" * 100_000):
            result = await tools.execute("aliased", broken)
            assert (result.is_error, result.code) == (True, "INVALID_ARGS")
            assert "unknown argument" not in result.content


async def test_crashing_validator_is_the_tools_error() -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder()
        tools.register(make_tool("crash", Crashing, execute=body))
        result = await tools.execute("crash", '{"value": "v"}', ToolCall(id="c1"))
        assert result == error("Error: validator crashed on v", "TOOL_ERROR")
        assert body.calls == []


async def test_unknown_tool() -> None:
    async with tools_runtime() as (_root, tools):
        result = await tools.execute("ghost", "{}", ToolCall(id="c1"))
        assert result == error('unknown tool "ghost"', "UNKNOWN_TOOL")


async def test_scoped_resolution_and_restriction() -> None:
    async with tools_runtime() as (root, tools):
        shared = Recorder("global")
        tools.register(make_tool("read", ReadArgs, execute=shared))
        tools.register(make_tool("bash", ReadArgs, execute=Recorder("global bash")))
        agent = create_scope(root, "agent")
        agent.ctx.tools.register(make_tool("read", ReadArgs, execute=Recorder("scoped")))
        agent.ctx.tools.register(make_tool("own", ReadArgs, execute=Recorder("own")))
        agent.ctx.tools.restrict(deny=["bash"])
        call = ToolCall(id="c1")
        run = agent.ctx.tools.execute
        tools.register(make_tool("todo", ReadArgs, execute=Recorder("global todo")))
        assert (await run("todo", '{"path": "a"}', call)).content == "global todo"
        assert (await run("read", '{"path": "a"}', call)).content == "scoped"
        assert (await run("own", '{"path": "a"}', call)).content == "own"
        assert await run("bash", '{"path": "a"}', call) == error(
            'unknown tool "bash"', "UNKNOWN_TOOL"
        )
        # Other views are unaffected.
        assert (await tools.execute("read", '{"path": "a"}', call)).content == "global"
        assert (await tools.execute("bash", '{"path": "a"}', call)).content == "global bash"
        assert await tools.execute("own", '{"path": "a"}', call) == error(
            'unknown tool "own"', "UNKNOWN_TOOL"
        )
        other = create_scope(root, "other")
        assert (await other.ctx.tools.execute("bash", {"path": "a"}, call)).content == (
            "global bash"
        )


def refuse(name: str) -> ToolResult:
    """A restriction's refusal, as plan mode answers."""
    return ToolResult(f"Error: not now: {name}", is_error=True, code="PLAN_MODE")


def agent_with_tools(root: Any, tools: Any, *own: str) -> Any:
    """Global ``read`` and ``bash``, and a scope ``agent`` with the ``own`` tools; each
    tool answers its name."""
    for name in ("read", "bash"):
        tools.register(make_tool(name, ReadArgs, execute=Recorder(name)))
    agent = create_scope(root, "agent")
    for name in own:
        agent.ctx.tools.register(make_tool(name, ReadArgs, execute=Recorder(name)))
    return agent


async def test_a_restriction_s_refusal_answers_what_it_does_not_admit() -> None:
    async with tools_runtime() as (root, tools):
        agent = agent_with_tools(root, tools, "own")

        assert tools.names() == ["read", "bash"]
        undo = agent.ctx.tools.restrict(allow=["read"], refusal=refuse)
        agent.ctx.tools.restrict(deny=["read"])  # another restriction, without a refusal
        call = ToolCall(id="c1")
        run = agent.ctx.tools.execute
        assert await run("bash", {"path": "a"}, call) == error("Error: not now: bash", "PLAN_MODE")
        assert await run("ghost", {}, call) == error("Error: not now: ghost", "PLAN_MODE")
        # Hidden by the other restriction only: the unknown-tool answer.
        assert await run("read", {"path": "a"}, call) == error(
            'unknown tool "read"', "UNKNOWN_TOOL"
        )
        assert (await run("own", {"path": "a"}, call)).content == "own"
        assert (await tools.execute("bash", {"path": "a"}, call)).content == "bash"
        await undo()
        assert (await run("bash", {"path": "a"}, call)).content == "bash"
        assert await create_scope(root, "other").ctx.tools.execute("ghost", {}, call) == error(
            'unknown tool "ghost"', "UNKNOWN_TOOL"
        )


async def test_a_refusal_that_raises_is_an_error_result() -> None:
    async with tools_runtime() as (root, tools):
        tools.register(make_tool("bash", ReadArgs, execute=Recorder("bash")))
        agent = create_scope(root, "agent")

        def refuse(name: str) -> ToolResult:
            raise QuotaError(f"{name} is over quota")

        agent.ctx.tools.restrict(deny=["bash"], refusal=refuse)
        result = await agent.ctx.tools.execute("bash", {}, ToolCall(id="c1"))
        assert result == error("Error: bash is over quota", "QUOTA_EXCEEDED")
        with pytest.raises(ToolTypeError, match="refusal= must be callable"):
            agent.ctx.tools.restrict(deny=["bash"], refusal="no")


class Broken(Exception):
    def __str__(self) -> str:
        raise ValueError("cannot print")


class QuotaError(DshError):
    code = "QUOTA_EXCEEDED"


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ValueError("disk on fire"), error("Error: disk on fire", "TOOL_ERROR")),
        (RuntimeError(), error("Error: RuntimeError", "TOOL_ERROR")),
        (Broken(), error("Error: <unprintable Broken>", "TOOL_ERROR")),
        (
            QuotaError("quota of 3 calls used up"),
            error("Error: quota of 3 calls used up", "QUOTA_EXCEEDED"),
        ),
        (QuotaError(), error("Error: QuotaError", "QUOTA_EXCEEDED")),
        (
            ToolArgumentsError("path must be relative"),
            error("Error: path must be relative", "INVALID_ARGS"),
        ),
    ],
)
async def test_tool_exceptions_become_results(exc: Exception, expected: ToolResult) -> None:
    async with tools_runtime() as (_root, tools):

        async def fail(args: BaseModel, call: ToolCall) -> str:
            raise exc

        tools.register(make_tool("fail", ReadArgs, execute=fail))
        assert await tools.execute("fail", '{"path": "a"}', ToolCall(id="c1")) == expected


async def test_wrong_return_type() -> None:
    async with tools_runtime() as (_root, tools):
        tools.register(make_tool("number", ReadArgs, execute=Recorder(42)))
        result = await tools.execute("number", '{"path": "a"}', ToolCall(id="c1"))
        assert result == error(
            'Error: tool "number" returned int; expected str or ToolResult', "TOOL_ERROR"
        )


async def test_sync_execute() -> None:
    async with tools_runtime() as (_root, tools):

        def sync_body(args: BaseModel, call: ToolCall) -> str:
            return "sync"

        tools.register(make_tool("sync", ReadArgs, execute=sync_body))
        result = await tools.execute("sync", '{"path": "a"}', ToolCall(id="c1"))
        assert result == error(
            'Error: tool "sync" execute returned str instead of an awaitable '
            "(it must be an async function)",
            "TOOL_ERROR",
        )


async def test_sync_execute_that_raises() -> None:
    async with tools_runtime() as (_root, tools):

        def sync_body(args: BaseModel, call: ToolCall) -> str:
            raise LookupError("no such file")

        tools.register(make_tool("sync", ReadArgs, execute=sync_body))
        result = await tools.execute("sync", '{"path": "a"}', ToolCall(id="c1"))
        assert result == error("Error: no such file", "TOOL_ERROR")


async def test_cancelled_mid_run() -> None:
    async with tools_runtime() as (_root, tools):
        started = anyio.Event()
        never = anyio.Event()
        seen: list[str] = []

        async def wait(args: BaseModel, call: ToolCall) -> str:
            started.set()
            try:
                await never.wait()
            except anyio.get_cancelled_exc_class():
                seen.append("cancelled")
                raise
            return "finished"

        tools.register(make_tool("wait", ReadArgs, execute=wait))
        scope = anyio.CancelScope()
        call = ToolCall(id="c1", cancel_scope=scope)
        results: list[ToolResult] = []
        caught: list[bool] = []

        async def run() -> None:
            with scope:
                results.append(await tools.execute("wait", '{"path": "a"}', call))
            caught.append(scope.cancelled_caught)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            assert not call.cancelled
            scope.cancel()
        assert call.cancelled
        assert seen == ["cancelled"]
        assert results == []
        assert caught == [True]


async def test_cancelled_before_dispatch() -> None:
    async with tools_runtime() as (_root, tools):
        body = Recorder()
        tools.register(make_tool("read", ReadArgs, execute=body))
        results: list[ToolResult] = []
        with anyio.CancelScope() as scope:
            scope.cancel()
            results.append(await tools.execute("read", '{"path": "a"}', ToolCall(id="c1")))
        assert scope.cancelled_caught
        assert results == []
        assert body.calls == []


async def test_tool_unregistered_while_running_completes() -> None:
    async with tools_runtime() as (_root, tools):
        started = anyio.Event()
        release = anyio.Event()

        async def slow(args: BaseModel, call: ToolCall) -> str:
            started.set()
            await release.wait()
            return "late"

        d = tools.register(make_tool("slow", ReadArgs, execute=slow))
        results: list[ToolResult] = []

        async def run() -> None:
            results.append(await tools.execute("slow", '{"path": "a"}', ToolCall(id="c1")))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            await d()
            release.set()
        assert results == [ToolResult(content="late")]
        assert (await tools.execute("slow", "{}", ToolCall(id="c2"))).code == "UNKNOWN_TOOL"


async def test_precisely_typed_tool() -> None:
    async def read(args: ReadArgs, call: ToolCall) -> str:
        return f"{args.path} up to {args.limit} lines"

    tool = Tool(name="read", description="Read a file.", parameters=ReadArgs, execute=read)
    async with tools_runtime() as (_root, tools):
        tools.register(tool)
        result = await tools.execute("read", '{"path": "a"}', ToolCall(id="c1"))
        assert result == ToolResult(content="a up to 100 lines")


async def test_a_restriction_with_own_covers_the_scope_s_own_tools() -> None:
    async with tools_runtime() as (root, tools):
        agent = agent_with_tools(root, tools, "keep", "own")

        async def visible() -> list[str]:
            assembly = await root.system_prompt.assemble(AssembleContext(scope=agent.ctx.scope))
            return [t.name for t in assembly.tools]

        with pytest.raises(ToolRestrictionError) as info:
            agent.ctx.tools.restrict(allow=["read", "ghost"], own=True)
        assert str(info.value) == (
            'tools.restrict() names unknown tool "ghost"; known tools: bash, keep, own, read'
        )
        undo = agent.ctx.tools.restrict(allow=["read", "bash", "keep"], refusal=refuse, own=True)
        # One without own= hides global tools only, as before.
        agent.ctx.tools.restrict(deny=["bash"])
        agent.ctx.tools.register(make_tool("later", ReadArgs, execute=Recorder("later")))
        assert await visible() == ["keep", "read"]
        call = ToolCall(id="c1")
        run = agent.ctx.tools.execute
        assert await run("own", {"path": "a"}, call) == error("Error: not now: own", "PLAN_MODE")
        assert await run("later", {"path": "a"}, call) == error(
            "Error: not now: later", "PLAN_MODE"
        )
        assert (await run("keep", {"path": "a"}, call)).content == "keep"
        assert (await run("read", {"path": "a"}, call)).content == "read"
        await undo()
        assert await visible() == ["keep", "later", "own", "read"]  # bash: still denied
        assert (await run("own", {"path": "a"}, call)).content == "own"
