"""``dsh prompt``: the command the system prompt package contributes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from dsh import cli
from dsh.testing import write_deployment
from tests.support import ECHO, HELLO, TWO_AGENTS, echo_deployment


def test_prompt_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["prompt", str(HELLO)]) == 0
    out = capsys.readouterr().out
    assert out == (
        "You are an AI agent powered by dsh.\n\n"
        "You are hello-agent, a friendly assistant.\n"
        "\n--- tools (0) ---\n"
    )
    assert cli.main(["prompt", "--json", str(HELLO)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "system": (
            "You are an AI agent powered by dsh.\n\nYou are hello-agent, a friendly assistant."
        ),
        "tools": [],
    }


def test_prompt_lists_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tool.py").write_text(
        textwrap.dedent(
            """
            from dsh_system_prompt import ToolProviderResult, ToolSchema

            inject = ["system_prompt"]


            def apply(ctx, config):
                schema = ToolSchema(
                    name="echo", description="Echo text.", parameters={"type": "object"}
                )
                ctx.system_prompt.tools(lambda context: ToolProviderResult(schemas=[schema]))
            """
        )
    )
    path = write_deployment(
        tmp_path, "- {id: sp, name: system-prompt}\n- {id: tool, name: ./tool.py}\n"
    )
    assert cli.main(["prompt", str(path)]) == 0
    out = capsys.readouterr().out
    tools = out.split("--- tools (1) ---\n", 1)[1]
    assert json.loads(tools) == {
        "name": "echo",
        "description": "Echo text.",
        "parameters": {"type": "object"},
    }


def test_prompt_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "noop.py").write_text("def apply(ctx, config):\n    return None\n")
    path = write_deployment(tmp_path, "- {id: noop, name: ./noop.py}\n")
    assert cli.main(["prompt", str(path)]) == 1
    assert capsys.readouterr().err == f"{path}: no system-prompt plugin is loaded\n"
    broken = write_deployment(tmp_path, "- {name: nothing-like-this}\n")
    assert cli.main(["prompt", str(broken)]) == 1
    assert 'unknown plugin "nothing-like-this"' in capsys.readouterr().err


def test_prompt_shows_the_agent_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["prompt", str(ECHO)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "You are an AI agent powered by dsh.\n\n"
        "You are echo-agent, running on echo-mock. Answer briefly.\n\n"
        "Use the echo tool when asked to echo.\n\n--- tools (1) ---\n"
    )
    assert cli.main(["prompt", "--json", "--agent", "main", str(ECHO)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agent"] == "main"
    assert [tool["name"] for tool in doc["tools"]] == ["echo"]
    assert "running on echo-mock" in doc["system"]
    assert cli.main(["prompt", "--agent", "nobody", str(ECHO)]) == 1
    assert capsys.readouterr().err == 'unknown agent "nobody"; known agents: "main"\n'
    assert cli.main(["prompt", "--agent", "nobody", str(HELLO)]) == 1
    assert capsys.readouterr().err == 'unknown agent "nobody"; known agents: (none)\n'


def test_prompt_global_view_with_several_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = echo_deployment(tmp_path, TWO_AGENTS)
    assert cli.main(["prompt", str(path)]) == 1
    assert capsys.readouterr().err == (
        'prompt variable "{{model}}" has no value for this assembly '
        '(section "deployment:persona")\n'
        '(that is the global view; choose an agent with --agent: "a", "b")\n'
    )
    assert cli.main(["prompt", str(path), "--agent", "a"]) == 0
    assert "On echo-mock." in capsys.readouterr().out
    plain = tmp_path / "plain"
    plain.mkdir()
    path = echo_deployment(plain, "{model: echo-mock, persona: Plain., agents: [{id: a}, {id: b}]}")
    assert cli.main(["prompt", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "agent" not in doc
    assert "Plain." in doc["system"]


def test_prompt_render_failure_without_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_deployment(
        tmp_path, "- {id: sp, name: system-prompt, config: {persona: 'On {{modle}}.'}}\n"
    )
    assert cli.main(["prompt", str(path)]) == 1
    assert capsys.readouterr().err == (
        'unknown prompt variable "{{modle}}" in section "deployment:persona"; '
        "registered variables: (none)\n"
    )
