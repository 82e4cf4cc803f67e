"""The ``echo`` tool of the echo example, with its own prompt guidance."""

from __future__ import annotations

from pydantic import BaseModel, Field

from dsh import Context
from dsh_system_prompt import PromptSection
from dsh_tools import Tool, ToolCall

name = "echo-tool"
inject = ["tools", "system_prompt"]


class EchoArgs(BaseModel):
    text: str = Field(description="The text to send back.")


async def echo(args: EchoArgs, call: ToolCall) -> str:
    return args.text


def apply(ctx: Context, config: None) -> object:
    yield ctx.tools.register(
        Tool(
            name="echo",
            description="Return the given text unchanged.",
            parameters=EchoArgs,
            execute=echo,
        )
    )
    yield ctx.system_prompt.section(
        PromptSection(name="tool:echo", order=100, text="Use the echo tool when asked to echo.")
    )
