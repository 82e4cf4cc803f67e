"""``todo_write``: a task list the model keeps, recorded in its session.

YAML name ``tool-todo``; it injects ``tools`` and ``sessions`` (it declares the
``todo/write`` event type). See this package's README.
"""

from __future__ import annotations

from ._tool import TODO_EVENT, TodoArgs, TodoItem, ToolTodo, ToolTodoConfig, description

plugin = ToolTodo

__all__ = [
    "TODO_EVENT",
    "TodoArgs",
    "TodoItem",
    "ToolTodo",
    "ToolTodoConfig",
    "description",
    "plugin",
]
