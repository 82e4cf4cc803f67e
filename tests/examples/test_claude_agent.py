"""The claude-agent example through the real ``dsh`` command: checked and its prompt
shown without a real key, and one task against a loopback server that speaks the
Messages API (``ANTHROPIC_BASE_URL``): Claude thinks, reads a file, and answers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.plugins.llm_anthropic.anthropic_support import (
    AnthropicServer,
    answer,
    block_start,
    block_stop,
    delta,
    finish,
    message_start,
)
from tests.plugins.llm_http_support import serve
from tests.support import EXAMPLES, run_dsh

EXAMPLE = EXAMPLES / "claude-agent" / "dsh.yml"
TOOLS = ["bash", "edit", "glob", "grep", "read", "todo_write", "write"]
SIGNATURE = "RXhhbXBsZVNpZ25hdHVyZQ=="


def environ(**values: str) -> dict[str, str]:
    """This process's environment without Anthropic or dsh settings, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DSH_"))}
    env.update(values)
    return env


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnthropicServer]:
    with serve(AnthropicServer, monkeypatch) as loopback:
        yield loopback


def test_check_and_prompt_need_a_key_but_not_a_real_one(tmp_path: Path) -> None:
    env = environ(ANTHROPIC_API_KEY="unused")
    checked = run_dsh("check", str(EXAMPLE), cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == (
        f'{EXAMPLE}: ok (12 plugin entries active, prompt renders for agent "main" (7 tools))\n'
    )
    shown = run_dsh("prompt", str(EXAMPLE), cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    prompt, tools = shown.stdout.split(f"\n\n--- tools ({len(TOOLS)}) ---\n")
    assert "You are claude-agent, powered by claude-sonnet-4-5." in prompt
    names = [line.split('"')[3] for line in tools.splitlines() if line.startswith('  "name"')]
    assert names == TOOLS


def test_a_missing_key_fails_at_once_naming_it(tmp_path: Path) -> None:
    done = run_dsh("run", str(EXAMPLE), "-p", "hi", cwd=tmp_path, env=environ())
    assert done.returncode == 1
    assert "environment variable ANTHROPIC_API_KEY is not set" in done.stderr
    assert not (tmp_path / ".dsh").exists()


def test_claude_thinks_reads_a_file_and_answers(server: AnthropicServer, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    server.stream(
        message_start(input_tokens=900),
        block_start(0, type="thinking", thinking=""),
        delta(0, type="thinking_delta", thinking="I should read the notes."),
        delta(0, type="signature_delta", signature=SIGNATURE),
        block_stop(0),
        block_start(1, type="tool_use", id="toolu_01Read", name="read", input={}),
        delta(1, type="input_json_delta", partial_json='{"file_path": "no'),
        delta(1, type="input_json_delta", partial_json='tes.txt"}'),
        block_stop(1),
        *finish("tool_use", 40),
    )
    server.stream(*answer("The notes say: ", "remember the milk."))
    env = environ(ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=server.url)
    done = run_dsh("run", str(EXAMPLE), "-p", "What do my notes say?", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "The notes say: remember the milk."
    assert "[tool] read " in done.stderr
    asked, answered = server.requests
    for seen in (asked, answered):
        assert seen.path == "/v1/messages"
        assert seen.headers["x-api-key"] == "sk-ant-test"
        assert seen.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in seen.headers
        assert seen.body["model"] == "claude-sonnet-4-5"
        assert seen.body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
        assert seen.body["system"].startswith("You are an AI agent powered by dsh.")
        assert [tool["name"] for tool in seen.body["tools"]] == TOOLS
    thought, call = answered.body["messages"][1]["content"]
    assert thought == {
        "type": "thinking",
        "thinking": "I should read the notes.",
        "signature": SIGNATURE,
    }
    assert call["input"] == {"file_path": "notes.txt"}
    (result,) = answered.body["messages"][2]["content"]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_01Read"
    assert "remember the milk" in result["content"]
