"""Context windows: from the config (``context_windows``, ``context_window``), else asked
once from the server (vLLM's ``/v1/models``, llama.cpp's ``/props``, Ollama's
``/api/show``); and a 200 without an event for a request near the window is an
overflow (``CONTEXT_LENGTH``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest

from dsh_llm import Finish, LlmRequest, Message, UsageChunk, estimate_tokens
from dsh_llm_openai import OpenAICompatible, OpenAICompatibleConfig
from tests.plugins.llm_http_support import Reply, assert_refused, closed_port
from tests.plugins.llm_openai.openai_support import final_failure

if TYPE_CHECKING:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

pytestmark = pytest.mark.anyio

VLLM = Reply.json(
    200,
    {
        "object": "list",
        "data": [
            {"id": "other", "object": "model", "max_model_len": 1024},
            {"id": "test-model", "object": "model", "max_model_len": 32768},
        ],
    },
)
#: What llama.cpp's and llama-cpp-python's /v1/models say: no window.
PLAIN_MODELS = Reply.json(200, {"object": "list", "data": [{"id": "test-model"}]})
LLAMA_CPP = Reply.json(200, {"default_generation_settings": {"n_ctx": 4096, "params": {}}})
OLLAMA = Reply.json(
    200,
    {
        "modelfile": "FROM llama3.2",
        "model_info": {
            "general.architecture": "llama",
            "general.parameter_count": 3212749888,
            "llama.context_length": 131072,
        },
    },
)


def probed(server: OpenAIServer) -> list[tuple[str, str]]:
    return [(seen.method, seen.path) for seen in server.probes]


# -- from the config ------------------------------------------------------------------


def test_the_config_gives_windows_by_model_then_for_the_rest() -> None:
    config = OpenAICompatibleConfig(
        models=["a", "b"], context_windows={"a": 8192}, context_window=4096
    )
    assert config.context_windows == {"a": 8192}
    assert config.context_window == 4096
    # "" is an unset !env [NAME, ""]
    unset = OpenAICompatibleConfig.model_validate({"models": ["a"], "context_window": ""})
    assert unset.context_window is None


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"context_windows": {"m": 0}}, r"greater than 0 \(at context_windows.m\)"),
        ({"context_windows": {"m": "big"}}, r"\(at context_windows.m\)"),
        ({"context_window": -1}, r"greater than 0 \(at context_window\)"),
        ({"probe_context_window": "sometimes"}, r"\(at probe_context_window\)"),
    ],
)
async def test_bad_windows_fail_the_plugin_naming_the_key(
    config: dict[str, Any], problem: str
) -> None:
    await assert_refused(OpenAICompatible, {"models": ["m"], **config}, problem)


async def test_a_configured_window_is_answered_without_asking_the_server(
    server: OpenAIServer,
) -> None:
    server.routes[("GET", "/props")] = LLAMA_CPP
    config = {"models": ["test-model", "b"], "context_windows": {"test-model": 8192}}
    async with server.llm(**config, context_window=2048) as llm:
        assert llm.context_window("test-model") == 8192
        assert await llm.find_context_window("test-model") == 8192
        assert llm.context_window("b") == await llm.find_context_window("b") == 2048
        assert llm.context_window("unserved") is None
        assert await llm.find_context_window("unserved") is None
    assert server.probes == []


# -- from the server ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("routes", "window", "asked"),
    [
        ({("GET", "/v1/models"): VLLM}, 32768, [("GET", "/v1/models")]),
        (
            {("GET", "/v1/models"): PLAIN_MODELS, ("GET", "/props"): LLAMA_CPP},
            4096,
            [("GET", "/v1/models"), ("GET", "/props")],
        ),
        (
            {("GET", "/v1/models"): PLAIN_MODELS, ("POST", "/api/show"): OLLAMA},
            131072,
            [("GET", "/v1/models"), ("GET", "/props"), ("POST", "/api/show")],
        ),
    ],
    ids=["vllm", "llama.cpp", "ollama"],
)
async def test_the_server_is_asked_once_lazily(
    server: OpenAIServer,
    routes: dict[tuple[str, str], Reply],
    window: int,
    asked: list[tuple[str, str]],
) -> None:
    server.routes.update(routes)
    async with server.llm() as llm:
        assert llm.context_window("test-model") is None  # nobody asked yet
        assert server.probes == []
        assert await llm.find_context_window("test-model") == window
        assert await llm.find_context_window("test-model") == window
        assert llm.context_window("test-model") == window  # known now, without I/O
    assert probed(server) == asked
    # Sent with the key, asking for JSON; Ollama's names the model.
    for seen in server.probes:
        assert seen.headers["authorization"] == "Bearer sk-test"
        assert seen.headers["accept"] == "application/json"
    if asked[-1][1] == "/api/show":
        assert server.probes[-1].body == {"model": "test-model"}


async def test_a_base_url_without_v1_is_the_root(server: OpenAIServer) -> None:
    server.routes[("GET", "/models")] = PLAIN_MODELS
    server.routes[("GET", "/props")] = LLAMA_CPP
    async with server.llm(base_url=server.root) as llm:
        assert await llm.find_context_window("test-model") == 4096
    assert probed(server) == [("GET", "/models"), ("GET", "/props")]


JUNK: list[dict[tuple[str, str], Reply]] = [
    {},  # every probe 404s
    {
        ("GET", "/v1/models"): Reply(200, {"Content-Type": "application/json"}, body=b"<html>"),
        ("GET", "/props"): Reply.json(200, {"default_generation_settings": {"n_ctx": "4096"}}),
        ("POST", "/api/show"): Reply.json(200, {"model_info": {"llama.context_length": 0}}),
    },
    {
        ("GET", "/v1/models"): Reply.json(200, ["not", "an", "object"]),
        ("GET", "/props"): Reply.json(200, {"default_generation_settings": 4096}),
        ("POST", "/api/show"): Reply.json(200, {"model_info": "llama"}),
    },
    {
        ("GET", "/v1/models"): Reply.json(200, {"data": ["test-model", {"id": "x"}]}),
        ("GET", "/props"): Reply.json(500, {"error": "busy"}),
        ("POST", "/api/show"): Reply.json(200, {"model_info": {"general.name": "x"}}),
    },
]


@pytest.mark.parametrize("routes", JUNK, ids=["404", "junk", "wrong-types", "partial"])
async def test_a_failed_probe_is_ignored_and_not_repeated(
    server: OpenAIServer, routes: dict[tuple[str, str], Reply], caplog: pytest.LogCaptureFixture
) -> None:
    server.routes.update(routes)
    caplog.set_level(logging.DEBUG, logger="dsh.llm-openai")
    async with server.llm() as llm:
        assert await llm.find_context_window("test-model") is None
        assert await llm.find_context_window("test-model") is None
        assert llm.context_window("test-model") is None
    assert len(server.probes) == 3  # each way once, not again
    lines = [r for r in caplog.records if r.name == "dsh.llm-openai"]
    assert len(lines) == 3
    assert all(r.levelno == logging.DEBUG and r.exc_info is None for r in lines)
    assert "without one" in lines[0].getMessage()


async def test_an_unreachable_server_is_asked_once(caplog: pytest.LogCaptureFixture) -> None:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

    caplog.set_level(logging.DEBUG, logger="dsh.llm-openai")
    server = OpenAIServer()
    server.close()
    server.url = f"http://127.0.0.1:{closed_port()}/v1"
    async with server.llm() as llm:
        assert await llm.find_context_window("test-model") is None
        assert await llm.find_context_window("test-model") is None
    [line] = [r for r in caplog.records if r.name == "dsh.llm-openai"]
    assert "GET http://127.0.0.1:" in line.getMessage()
    assert "/v1/models failed" in line.getMessage()
    assert line.exc_info is None


async def test_probing_can_be_turned_off(server: OpenAIServer) -> None:
    server.routes[("GET", "/v1/models")] = VLLM
    async with server.llm(probe_context_window=False) as llm:
        assert await llm.find_context_window("test-model") is None
    assert server.probes == []


async def test_a_request_does_not_ask_the_server(server: OpenAIServer) -> None:
    # Only who needs the window asks (compaction, an overflow): a plain step does not.
    server.routes[("GET", "/v1/models")] = VLLM
    server.ok()
    chunks = await server.run()
    assert chunks[-1] == Finish("stop")
    assert server.probes == []


async def test_a_server_that_sends_no_usage_gives_no_usage_chunk(server: OpenAIServer) -> None:
    # The loop then records an estimate (dsh_llm.estimate_tokens of the request).
    server.ok("fine")
    chunks = await server.run()
    assert not [c for c in chunks if isinstance(c, UsageChunk)]


# -- a 200 without an event -------------------------------------------------------------


def big(chars: int) -> LlmRequest:
    return LlmRequest("test-model", (Message.user("x" * chars),))


def empty_stream(server: OpenAIServer) -> None:
    server.stream(headers={"x-request-id": "req-9"})  # headers, then the end: no event


async def test_an_empty_stream_near_the_window_is_context_length(server: OpenAIServer) -> None:
    request = big(400)
    size = estimate_tokens(request)
    assert 100 <= size < 120
    empty_stream(server)
    got = final_failure(await server.run(request, context_windows={"test-model": 110}))
    assert got.code == "CONTEXT_LENGTH"
    assert got.message.startswith(
        f"the request is too long for the context window of 'test-model' (an estimated "
        f"{size} tokens of 110): {server.endpoint} answered HTTP 200"
    )
    assert got.request_id == "req-9"
    assert server.probes == []  # the window was configured


async def test_the_window_of_an_overflow_is_asked_from_the_server(server: OpenAIServer) -> None:
    # llama.cpp-like: the request is 90 % of n_ctx or more; the probe comes after the
    # empty answer, once.
    server.routes[("GET", "/props")] = Reply.json(
        200, {"default_generation_settings": {"n_ctx": 1000}}
    )
    request = big(3700)  # about 930 tokens: 93 %
    async with server.llm() as llm:
        for _ in range(2):
            empty_stream(server)
            chunks = [chunk async for chunk in llm.stream(request)]
            assert final_failure(chunks).code == "CONTEXT_LENGTH"
    assert probed(server) == [("GET", "/v1/models"), ("GET", "/props")]


@pytest.mark.parametrize(
    ("windows", "hint"),
    [
        ({"test-model": 1000}, "; the server may have failed mid-request (its log says why)"),
        (
            {},
            "; the server may have failed mid-request (its log says why), or the request "
            "may not fit the context window of 'test-model', which is unknown (set "
            "context_windows to have that recognised)",
        ),
    ],
)
async def test_an_empty_stream_far_from_the_window_is_a_bad_response(
    server: OpenAIServer, windows: dict[str, int], hint: str
) -> None:
    server.stream(b"oops\n", headers={"x-request-id": "req-9"})
    got = final_failure(await server.run(big(3000), context_windows=windows))  # 75 %
    assert got.code == "BAD_RESPONSE"
    assert got.message == (
        f"{server.endpoint} answered HTTP 200 (text/event-stream) without a single "
        f"server-sent event: 'oops'{hint} (request id req-9)"
    )


async def test_a_done_marker_alone_is_an_empty_stream(server: OpenAIServer) -> None:
    server.stream("[DONE]")
    got = final_failure(await server.run(big(400), context_windows={"test-model": 100}))
    assert got.code == "CONTEXT_LENGTH"


@pytest.mark.parametrize(("chars", "code"), [(400, "CONTEXT_LENGTH"), (40, "STREAM_INTERRUPTED")])
async def test_a_hang_up_before_the_first_event(
    server: OpenAIServer, chars: int, code: str
) -> None:
    server.stream(server.DROP)
    got = final_failure(await server.run(big(chars), context_windows={"test-model": 100}))
    assert got.code == code
    assert "dropped mid-stream" in got.message


async def test_a_hang_up_after_an_event_is_an_interrupted_stream(server: OpenAIServer) -> None:
    server.stream(*server.partial("half"), server.DROP)
    got = final_failure(await server.run(big(400), context_windows={"test-model": 100}))
    assert got.code == "STREAM_INTERRUPTED"
