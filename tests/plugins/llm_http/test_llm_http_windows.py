"""Context windows in the HTTP core, for every adapter built on it: the config's
(``context_windows``, ``context_window``), one probe per model whoever asks, and a 200
without an event for a request near the window reported as ``CONTEXT_LENGTH``."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from dsh_llm import LlmRequest, Message
from dsh_llm.http import HttpModelConfig
from tests.plugins.llm_http_support import LoopbackServer, final_failure

pytestmark = pytest.mark.anyio


def adapter_config(server: LoopbackServer, **overrides: Any) -> HttpModelConfig:
    """The validated config of ``server``'s adapter."""
    config_type = server.plugin.Config
    assert config_type is not None
    config = config_type.model_validate(server.config(**overrides))
    assert isinstance(config, HttpModelConfig)
    return config


async def test_windows_come_from_the_config(server: LoopbackServer) -> None:
    config = {"models": ["a", "b", "c"], "context_windows": {"a": 200_000, "b": 100}}
    async with server.llm(**config) as llm:
        assert llm.context_window("a") == 200_000
        assert llm.context_window("b") == 100
        assert llm.context_window("c") is None
        assert await llm.find_context_window("c") is None
    async with server.llm(**config, context_window=8192) as llm:
        assert llm.context_window("c") == 8192
        assert llm.context_window("a") == 200_000  # by name wins


async def test_an_empty_answer_to_a_request_near_the_window_is_context_length(
    server: LoopbackServer,
) -> None:
    server.stream()
    request = LlmRequest("test-model", (Message.user("x" * 400),))
    got = final_failure(await server.run(request, context_windows={"test-model": 100}))
    assert got.code == "CONTEXT_LENGTH"
    assert got.message.startswith("the request is too long for the context window")


async def test_one_probe_per_model_whoever_asks(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = adapter_config(server, models=["m", "n"])
    asked: list[str] = []
    release = anyio.Event()

    async def probe(model: str) -> int | None:
        asked.append(model)
        await release.wait()
        return 4096 if model == "m" else None

    async with httpx.AsyncClient() as client:
        adapter = server.plugin.Adapter(config, client)
        assert await adapter.probe_context_window("m") is None  # the default: none
        monkeypatch.setattr(adapter, "probe_context_window", probe)
        found: list[int | None] = []

        async def find(model: str) -> None:
            found.append(await adapter.find_context_window(model))

        async with anyio.create_task_group() as tasks:
            for model in ("m", "m", "n", "n"):
                tasks.start_soon(find, model)
            await anyio.wait_all_tasks_blocked()
            release.set()
        assert sorted(asked) == ["m", "n"]
        assert sorted(found, key=str) == [4096, 4096, None, None]
        assert await adapter.find_context_window("m") == 4096
        assert await adapter.find_context_window("n") is None
        assert sorted(asked) == ["m", "n"]  # not asked again, even after "no answer"


async def test_a_cancelled_probe_is_asked_again(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = adapter_config(server)
    calls: list[str] = []

    async def probe(model: str) -> int | None:
        calls.append(model)
        if len(calls) == 1:
            await anyio.sleep_forever()
        return 2048

    async with httpx.AsyncClient() as client:
        adapter = server.plugin.Adapter(config, client)
        monkeypatch.setattr(adapter, "probe_context_window", probe)
        waited: list[int | None] = []

        async def wait_for_it() -> None:
            waited.append(await adapter.find_context_window("test-model"))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(adapter.find_context_window, "test-model")
            await anyio.wait_all_tasks_blocked()
            tasks.start_soon(wait_for_it)
            await anyio.wait_all_tasks_blocked()
            tasks.cancel_scope.cancel()
        # The waiter, cancelled too, never answered; the next caller asks again.
        assert waited == []
        assert await adapter.find_context_window("test-model") == 2048
        assert calls == ["test-model", "test-model"]
