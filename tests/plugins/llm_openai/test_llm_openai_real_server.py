"""Opt-in: the adapter against a real llama-cpp-python server (``chatml-function-calling``,
which calls a tool only when one is forced and overflows with an empty 200).

Skipped unless ``DSH_TEST_REAL_SERVER=1`` and ``DSH_REAL_SERVER_URL`` is the server's
``base_url`` (``http://127.0.0.1:<port>/v1``; the project's sibling
``shared/realserver/start-llama.sh`` starts one on loopback and prints its port).
``DSH_REAL_SERVER_MODEL`` names the model (``smollm2``) and ``DSH_REAL_SERVER_N_CTX``
its ``--n_ctx`` (4096), which that server does not report.
"""

from __future__ import annotations

import json
import os
from contextlib import aclosing
from ipaddress import ip_address
from urllib.parse import urlsplit

import pytest

from dsh import Context
from dsh_llm import (
    BlockAssembler,
    Finish,
    Llm,
    LlmRequest,
    Message,
    ToolCallBlock,
    ToolResultBlock,
)
from dsh_llm_openai import OpenAICompatible
from dsh_system_prompt import ToolSchema

URL = os.environ.get("DSH_REAL_SERVER_URL", "")
MODEL = os.environ.get("DSH_REAL_SERVER_MODEL", "smollm2")
N_CTX = int(os.environ.get("DSH_REAL_SERVER_N_CTX", "4096"))

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        os.environ.get("DSH_TEST_REAL_SERVER") != "1" or not URL,
        reason="set DSH_TEST_REAL_SERVER=1 and DSH_REAL_SERVER_URL to a llama-cpp-python server",
    ),
]

TIME = ToolSchema(
    "get_time",
    "The current time in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
QUESTION = Message.user("What time is it in Paris? Use the get_time tool.")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # one model call at a time is slow enough: one backend


def test_the_server_is_on_loopback() -> None:
    host = urlsplit(URL).hostname or ""
    assert ip_address(host).is_loopback, f"DSH_REAL_SERVER_URL must be a loopback URL: {URL}"


async def answer(llm: Llm, request: LlmRequest) -> tuple[Finish, Message]:
    assembler = BlockAssembler()
    async with aclosing(llm.stream(request)) as chunks:
        async for chunk in chunks:
            assembler.push(chunk)
    result = assembler.result()
    return result.finish, result.message


async def start(root: Context) -> Llm:
    await root.plugin(Llm)
    config = {
        "base_url": URL,
        "models": [MODEL],
        "context_windows": {MODEL: N_CTX},
        "tool_choice": {"first_step": "get_time", "then": "none"},
        "temperature": 0,
        "max_retries": 0,
        "read_timeout": 600,
    }
    await root.plugin(OpenAICompatible, config)
    llm: Llm = root.llm
    return llm


async def test_a_forced_call_then_an_answer() -> None:
    async with Context() as root:
        llm = await start(root)
        first = LlmRequest(MODEL, (QUESTION,), tools=(TIME,), max_tokens=64, turn=1, step=1)
        finish, message = await answer(llm, first)
        assert finish == Finish("tool-calls"), finish
        [call] = message.tool_calls
        assert call.name == "get_time"
        json.loads(call.arguments)  # the grammar makes it JSON
        result = Message("tool", (ToolResultBlock(call.id, "14:05"),))
        history = (
            QUESTION,
            Message("assistant", (ToolCallBlock(call.id, call.name, call.arguments),)),
            result,
        )
        second = LlmRequest(MODEL, history, tools=(TIME,), max_tokens=64, turn=1, step=2)
        finish, message = await answer(llm, second)
        # An answer: text (a small model may run to max_tokens), no call.
        assert finish.reason in ("stop", "max-tokens"), finish
        assert message.text.strip()
        assert not message.tool_calls


async def test_an_overflow_is_context_length() -> None:
    async with Context() as root:
        llm = await start(root)
        text = "word " * N_CTX  # about 1.25 tokens a word for this tokenizer: over n_ctx
        request = LlmRequest(MODEL, (Message.user(text),), tools=(TIME,), turn=1, step=2)
        finish, _ = await answer(llm, request)
        assert finish.failure is not None
        assert finish.failure.code == "CONTEXT_LENGTH", finish.failure
        assert "without a single server-sent event" in finish.failure.message
