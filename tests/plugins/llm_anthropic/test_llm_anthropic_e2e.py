"""End to end from a YAML deployment: Claude thinks, calls a tool, and the next request
sends the signed thinking back with the tool use, and the result in the user message."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dsh import Context, load_deployment
from dsh.testing import run_turn, write_deployment
from dsh_llm import Message, ReasoningBlock, ToolCallBlock
from tests.plugins.llm_anthropic.anthropic_support import SIGNATURE, answer
from tests.support import event_data

if TYPE_CHECKING:
    from tests.plugins.llm_anthropic.anthropic_support import AnthropicServer

pytestmark = pytest.mark.anyio

DEPLOYMENT = """
- id: model
  name: llm-anthropic
  config:
    api_key: !env TEST_KEY
    base_url: !env TEST_BASE_URL
    models: [claude-test]
    retry_backoff: 0
    max_tokens: 16000
    thinking: {budget_tokens: 4000}
- id: agent-core
  name: agent-core
  config:
    model: claude-test
    persona: "You are a weather agent."
- id: weather
  name: tests.plugins.llm_anthropic.weather_tool
"""

RESULT = "18 degrees celsius and cloudy in Paris, France"


async def test_thinking_and_tool_use_round_trip_through_a_deployment(
    server: AnthropicServer, tmp_path: Path
) -> None:
    server.play("thinking_tool_use")
    server.stream(*answer("It is 18 degrees ", "and cloudy."))
    path = write_deployment(tmp_path, DEPLOYMENT)
    environ = {"TEST_KEY": "sk-ant-from-env", "TEST_BASE_URL": server.url}
    async with Context() as root:
        await load_deployment(path, root, environ=environ)
        agent = root.agents.get("main")
        assert await run_turn(agent, "What's the weather in Paris?") == {"kind": "completed"}
        session = agent.session
        (result,) = event_data(session, "tool/result")
        assert result["content"] == RESULT
        first, second = event_data(session, "assistant/message")
        thought = Message.from_json(first["message"]).content[0]
        # The session keeps the signature, so the history sends it back.
        assert thought == ReasoningBlock(
            "The user wants the weather in Paris. I should call get_weather.", signature=SIGNATURE
        )
        assert first["usage"] == {
            "input_tokens": 512,
            "output_tokens": 89,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
        }
        assert Message.from_json(second["message"]).text == "It is 18 degrees and cloudy."
        assert isinstance(session.derive_messages()[1].content[2], ToolCallBlock)

    asked, answered = server.requests
    for seen in (asked, answered):
        assert seen.path == "/v1/messages"
        assert seen.headers["x-api-key"] == "sk-ant-from-env"
        assert "authorization" not in seen.headers
        body = seen.body
        assert body["model"] == "claude-test"
        assert body["max_tokens"] == 16000
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 4000}
        assert "You are a weather agent." in body["system"]
        (tool,) = body["tools"]
        assert tool["name"] == "get_weather"
        assert tool["input_schema"]["required"] == ["location"]
    question = {
        "role": "user",
        "content": [{"type": "text", "text": "What's the weather in Paris?"}],
    }
    assert asked.body["messages"] == [question]
    assert answered.body["messages"] == [
        question,
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "The user wants the weather in Paris. I should call get_weather.",
                    "signature": SIGNATURE,
                },
                {"type": "text", "text": "Let me check the weather."},
                {
                    "type": "tool_use",
                    "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "name": "get_weather",
                    "input": {"location": "Paris, France", "unit": "celsius"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "content": RESULT,
                }
            ],
        },
    ]
