"""The usual values take shortcuts (a ``str`` exactly needs no ``isinstance`` call):
their subclasses get the very same treatment."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from dsh_tools import ToolCall, ToolResult
from tests.plugins.tools.tools_support import make_tool, tools_runtime

pytestmark = pytest.mark.anyio


class Text(str):
    """A str subclass (what a wrapper library may hand over)."""


class EchoArgs(BaseModel):
    text: str


async def echo(args: EchoArgs, call: ToolCall) -> str:
    return Text(args.text)


async def test_arguments_text_of_a_str_subclass_is_json_text() -> None:
    async with tools_runtime() as (_root, tools):
        tools.register(make_tool("echo", EchoArgs, execute=echo))
        result = await tools.execute("echo", Text('{"text": "hi"}'))
        assert result == ToolResult(content="hi")
        assert type(result.content) is Text  # the tool's str, kept as it is


async def test_unknown_names_in_str_subclass_text_are_refused() -> None:
    async with tools_runtime() as (_root, tools):
        tools.register(make_tool("echo", EchoArgs, execute=echo))
        result = await tools.execute("echo", Text('{"text": "hi", "loud": true, "x": 1}'))
        assert result.code == "INVALID_ARGS"
        assert result.content.startswith(
            'invalid arguments: unknown arguments "loud", "x" (echo takes: text)'
        )


async def test_blank_str_subclass_text_means_no_arguments() -> None:
    async with tools_runtime() as (_root, tools):
        tools.register(make_tool("echo", EchoArgs, execute=echo))
        result = await tools.execute("echo", Text("  "))
        assert result.code == "INVALID_ARGS"
        assert "text: Field required" in result.content
