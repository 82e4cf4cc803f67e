"""The coding example's model entry against local servers: its context window and its
``tool_choice`` come from environment variables; unset, they change nothing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dsh import CheckReport, Context, load_deployment
from dsh.testing import run_turn
from tests.plugins.llm_http_support import Reply
from tests.support import EXAMPLES

if TYPE_CHECKING:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

pytestmark = pytest.mark.anyio

CODING_AGENT = EXAMPLES / "coding-agent" / "dsh.yml"


async def one_turn(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str
) -> tuple[int | None, Any]:
    """The window the example gives its model, and the ``tool_choice`` of a turn's two
    steps (a call of ``todo_write``, then an answer)."""
    monkeypatch.chdir(tmp_path)  # its sessions live under ./.dsh
    call = server.tool(0, id="c1", name="todo_write", arguments='{"todos": []}')
    server.stream(server.delta(tool_calls=[call]), server.delta(finish="tool_calls"), "[DONE]")
    server.ok("done")
    environ = {"DEEPSEEK_API_KEY": "k", "DEEPSEEK_BASE_URL": server.url, **env}
    async with Context() as root:
        await load_deployment(CODING_AGENT, root, environ=environ)
        model = env.get("DSH_MODEL", "deepseek-chat")
        window = await root.llm.find_context_window(model)
        assert await run_turn(root.agents.get("main"), "plan it") == {"kind": "completed"}
    sent = [seen.body.get("tool_choice", "-") for seen in server.requests]
    return window, sent


async def test_unset_the_example_talks_to_deepseek_as_before(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await one_turn(server, tmp_path, monkeypatch) == (131072, ["-", "-"])
    assert server.probes == []


async def test_a_local_server_gets_its_window_and_a_tool_forced_once(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "DSH_MODEL": "smollm2",
        "DSH_CONTEXT_WINDOW": "40960",
        "DSH_FIRST_TOOL_CHOICE": "todo_write",
        "DSH_TOOL_CHOICE": "none",
    }
    forced = {"type": "function", "function": {"name": "todo_write"}}
    assert await one_turn(server, tmp_path, monkeypatch, **env) == (40960, [forced, "none"])


async def test_a_local_server_that_says_its_window(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama.cpp: /props gives the window; compaction reads it once it was found.
    server.routes[("GET", "/props")] = Reply.json(
        200, {"default_generation_settings": {"n_ctx": 16384}}
    )
    window, sent = await one_turn(server, tmp_path, monkeypatch, DSH_MODEL="local")
    assert (window, sent) == (16384, ["-", "-"])
    assert [seen.path for seen in server.probes] == ["/v1/models", "/props"]


async def test_compaction_asks_the_server_for_the_window_before_the_first_request(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nobody asks first: compaction's own request listener has the adapter probe once.
    monkeypatch.chdir(tmp_path)
    server.routes[("GET", "/props")] = Reply.json(
        200, {"default_generation_settings": {"n_ctx": 16384}}
    )
    server.ok("done")
    server.ok("again")
    environ = {"DEEPSEEK_API_KEY": "k", "DEEPSEEK_BASE_URL": server.url, "DSH_MODEL": "local"}
    async with Context() as root:
        await load_deployment(CODING_AGENT, root, environ=environ)
        agent = root.agents.get("main")
        assert await run_turn(agent, "hello") == {"kind": "completed"}
        assert await run_turn(agent, "and again") == {"kind": "completed"}
        assert root.compaction.context_window("local") == 16384
    assert [seen.path for seen in server.probes] == ["/v1/models", "/props"]


async def test_dsh_check_asks_the_server_for_a_window_only_it_knows(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    environ = {"DEEPSEEK_API_KEY": "k", "DEEPSEEK_BASE_URL": server.url, "DSH_MODEL": "local"}
    async with Context() as root:
        await load_deployment(CODING_AGENT, root, environ=environ)
        silent = CheckReport(CODING_AGENT)
        await root.serial("deployment/check", silent)
        assert any("no context window is known" in line for line in silent.problems)
    server.routes[("GET", "/props")] = Reply.json(
        200, {"default_generation_settings": {"n_ctx": 16384}}
    )
    async with Context() as root:
        await load_deployment(CODING_AGENT, root, environ=environ)
        told = CheckReport(CODING_AGENT)
        await root.serial("deployment/check", told)
        assert told.problems == []
