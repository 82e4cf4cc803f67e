"""A tool model's own ``model_validate_json`` is honoured (perf8: execute otherwise
calls the model's validator directly)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from dsh_tools import ToolCall
from tests.plugins.tools.tools_support import make_tool, tools_runtime

pytestmark = pytest.mark.anyio


class OwnJson(BaseModel):
    text: str

    @classmethod
    def model_validate_json(cls, json_data: Any, **kwargs: Any) -> OwnJson:
        return super().model_validate_json(json_data.replace("hi", "HI"), **kwargs)


async def test_a_model_s_own_model_validate_json_is_used() -> None:
    async def shout(args: OwnJson, call: ToolCall) -> str:
        return args.text

    async with tools_runtime() as (_, tools):
        tools.register(make_tool("shout", OwnJson, execute=shout))
        result = await tools.execute("shout", '{"text": "hi"}')
    assert result.content == "HI"
