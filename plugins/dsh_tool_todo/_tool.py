"""The ``tool-todo`` plugin: ``todo_write``, a task list the model keeps in the session."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dsh import Disposer, Plugin
from dsh_tools import Tool, ToolArgumentsError, ToolCall

__all__ = ["TODO_EVENT", "TodoArgs", "TodoItem", "ToolTodo", "ToolTodoConfig", "description"]

#: The session event each call appends: ``{"todos": [{"content", "status"}, ...]}``.
TODO_EVENT = "todo/write"


def description(allow_parallel_in_progress: bool) -> str:
    """The tool's description, with the rule on tasks in progress the config chooses."""
    rule = (
        "Mark every task you are working on `in_progress`"
        if allow_parallel_in_progress
        else "Keep at most one task `in_progress` at a time"
    )
    return (
        "Keep a task list for work with several steps, so the user can follow it. Each "
        "call replaces the whole list: send every task, finished ones included, in order. "
        f"{rule}, and mark a task `completed` as soon as it is done."
    )


class TodoItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="The task, in a few words.")
    status: Literal["pending", "in_progress", "completed"]


class TodoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    todos: list[TodoItem] = Field(description="The whole list; it replaces the previous one.")


class ToolTodoConfig(BaseModel):
    """Config of ``tool-todo``."""

    model_config = ConfigDict(extra="forbid")

    #: Allow several tasks ``in_progress`` at once.
    allow_parallel_in_progress: bool = False


class ToolTodo(Plugin):
    """Registers ``todo_write`` and declares the ``todo/write`` session event. No
    section: the description says everything."""

    name = "tool-todo"
    Config = ToolTodoConfig
    inject = ("tools", "sessions")

    def setup(self) -> Iterator[Disposer]:
        yield self.ctx.sessions.declare_event_types(TODO_EVENT)
        yield self.ctx.tools.register(
            Tool(
                name="todo_write",
                description=description(self.config.allow_parallel_in_progress),
                parameters=TodoArgs,
                execute=self.execute,
            )
        )

    async def execute(self, args: TodoArgs, call: ToolCall) -> str:
        agent = call.agent
        if agent is None:
            raise ToolArgumentsError("todo_write requires an owning agent session")
        seen: set[str] = set()
        for item in args.todos:
            key = item.content.strip()
            if not key:
                raise ToolArgumentsError("invalid todo: `content` must be a non-empty string")
            if key in seen:
                raise ToolArgumentsError(f'invalid todos: duplicate content "{item.content}"')
            seen.add(key)
        counts = Counter(item.status for item in args.todos)
        active = counts["in_progress"]
        if active > 1 and not self.config.allow_parallel_in_progress:
            raise ToolArgumentsError(
                f"invalid todos: at most one task may be in_progress (got {active})"
            )
        todos = [item.model_dump() for item in args.todos]
        agent.session.append(TODO_EVENT, {"todos": todos})
        return (
            f"Updated todo list: {counts['pending']} pending, {active} in progress, "
            f"{counts['completed']} completed."
        )
