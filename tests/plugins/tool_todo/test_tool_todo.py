"""todo_write: whole-list replacement recorded in the session, the exact messages, the
config's rule on tasks in progress, and clean disposal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from dsh import ConfigError, Context
from dsh.testing import ScriptedModel, run_turn, text, tool_call, tool_calls
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_tool_todo import TODO_EVENT, ToolTodo, description
from dsh_tools import ToolCall, ToolResult
from tests.support import event_data

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def todo_runtime(
    *replies: Any, config: dict[str, Any] | None = None
) -> AsyncIterator[tuple[Context, Agent]]:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        ScriptedModel(*replies).install(root)
        await root.plugin(ToolTodo, config)
        yield root, root.agents.get("main")


def item(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status}


async def write(root: Context, agent: Agent | None, todos: list[Any]) -> ToolResult:
    done: ToolResult = await root.tools.execute(
        "todo_write", {"todos": todos}, ToolCall("t", agent=agent)
    )
    return done


async def test_each_call_replaces_the_list_and_records_it() -> None:
    async with todo_runtime() as (root, agent):
        first = [item("read the code", "completed"), item("fix it", "in_progress"), item("test")]
        done = await write(root, agent, first)
        assert (done.content, done.is_error) == (
            "Updated todo list: 1 pending, 1 in progress, 1 completed.",
            False,
        )
        again = await write(root, agent, [item("ship", "completed")])
        assert again.content == "Updated todo list: 0 pending, 0 in progress, 1 completed."
        empty = await write(root, agent, [])
        assert empty.content == "Updated todo list: 0 pending, 0 in progress, 0 completed."
        assert event_data(agent.session, TODO_EVENT) == [
            {"todos": first},
            {"todos": [item("ship", "completed")]},
            {"todos": []},
        ]


@pytest.mark.parametrize(
    ("todos", "message"),
    [
        ([item("")], "invalid todo: `content` must be a non-empty string"),
        ([item("a"), item("  ")], "invalid todo: `content` must be a non-empty string"),
        ([item("a"), item("a", "completed")], 'invalid todos: duplicate content "a"'),
        ([item("a"), item(" a ")], 'invalid todos: duplicate content " a "'),
        (
            [item("a", "in_progress"), item("b", "in_progress")],
            "invalid todos: at most one task may be in_progress (got 2)",
        ),
    ],
)
async def test_invalid_lists_are_refused_and_not_recorded(todos: list[Any], message: str) -> None:
    async with todo_runtime() as (root, agent):
        done = await write(root, agent, todos)
        assert (done.content, done.is_error, done.code) == (
            f"Error: {message}",
            True,
            "INVALID_ARGS",
        )
        assert event_data(agent.session, TODO_EVENT) == []


@pytest.mark.parametrize(
    ("todos", "problem"),
    [
        ([{"content": "a", "status": "done"}], "todos[0].status: Input should be 'pending'"),
        ([{"content": "a"}], "todos[0].status: Field required"),
        ([{"content": 3, "status": "pending"}], "todos[0].content: Input should be a valid"),
        ([{"content": "a", "status": "pending", "note": 1}], 'todos[0]: unknown key "note"'),
        ("nope", "todos: Input should be a valid list"),
    ],
)
async def test_malformed_lists_are_argument_errors(todos: Any, problem: str) -> None:
    async with todo_runtime() as (root, agent):
        done = await write(root, agent, todos)
    assert done.content.startswith(f"invalid arguments: {problem}")
    assert done.code == "INVALID_ARGS"


async def test_parallel_tasks_in_progress_when_the_config_allows_them() -> None:
    async with todo_runtime(config={"allow_parallel_in_progress": True}) as (root, agent):
        both = [item("a", "in_progress"), item("b", "in_progress")]
        done = await write(root, agent, both)
        assert done.content == "Updated todo list: 0 pending, 2 in progress, 0 completed."
        (schema,) = (await root.system_prompt.assemble()).tools
    assert schema.description == description(True)
    assert "Mark every task you are working on `in_progress`" in schema.description
    assert "at most one" not in description(True)
    assert "Keep at most one task `in_progress` at a time" in description(False)


async def test_a_call_without_an_agent_is_refused() -> None:
    async with todo_runtime() as (root, _):
        done = await write(root, None, [item("a")])
    assert (done.content, done.code) == (
        "Error: todo_write requires an owning agent session",
        "INVALID_ARGS",
    )


async def test_the_model_keeps_its_list_through_a_turn() -> None:
    calls = tool_calls(tool_call("todo_write", {"todos": [item("plan", "in_progress")]}))
    async with todo_runtime(calls, text("planned")) as (root, agent):
        assert await run_turn(agent, "plan") == {"kind": "completed"}
        (result,) = event_data(agent.session, "tool/result")
        assert result["content"] == "Updated todo list: 0 pending, 1 in progress, 0 completed."
        assembly = await root.system_prompt.assemble()
    assert [t.name for t in assembly.tools] == ["todo_write"]
    assert not [s for s in assembly.sections if s.name.startswith("tool:")]  # no section
    assert "description" not in assembly.tools[0].parameters


async def test_unloading_removes_the_tool_and_the_event_type() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        tools_before = dict(root.tools._global.tools)
        declared_before = dict(root.sessions._declared)  # the loop's usage/step
        fiber = await root.plugin(ToolTodo)
        assert TODO_EVENT in root.sessions.event_types()
        await fiber.dispose()
        assert root.tools._global.tools == tools_before
        assert root.sessions._declared == declared_before


async def test_a_bad_config_registers_nothing() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        declared_before = dict(root.sessions._declared)  # the loop's usage/step
        with pytest.raises(ConfigError, match=r"\(at allow_parallel\)"):
            await root.plugin(ToolTodo, {"allow_parallel": True})
        assert root.tools._global.tools == {}
        assert root.sessions._declared == declared_before
