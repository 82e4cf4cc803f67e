"""A ``get_weather`` tool, loaded by the llm-anthropic deployment test as a module plugin
(``name: tests.plugins.llm_anthropic.weather_tool``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from dsh import Disposer
from dsh_tools import Tool, ToolCall

name = "weather-tool"
inject = ["tools"]


class WeatherArgs(BaseModel):
    location: str
    unit: str = "celsius"


async def get_weather(args: WeatherArgs, call: ToolCall) -> str:
    return f"18 degrees {args.unit} and cloudy in {args.location}"


def apply(ctx: Any, config: Any) -> Iterator[Disposer]:
    tool = Tool(
        name="get_weather",
        description="The weather somewhere.",
        parameters=WeatherArgs,
        execute=get_weather,
    )
    yield ctx.tools.register(tool)
