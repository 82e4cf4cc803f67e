"""``dsh prompt`` lists the MCP tools: the plugin is ACTIVE only once they are."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dsh.cli import main
from dsh.testing import write_deployment
from tests.plugins.mcp.mcp_support import SERVER
from tests.plugins.mcp.servers.echo_server import SEARCH_SCHEMA
from tests.support import run_dsh


def deployment(directory: Path) -> Path:
    return write_deployment(
        directory,
        f"""\
        - name: system-prompt
          config: {{persona: "You use MCP tools."}}
        - name: tools
        - id: mcp
          name: mcp
          config:
            servers:
              echo: {{command: {sys.executable}, args: [{SERVER}]}}
        """,
    )


def test_dsh_prompt_lists_the_mcp_tools(tmp_path: Path) -> None:
    done = run_dsh("prompt", str(deployment(tmp_path)), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    tools = {tool["name"]: tool for tool in doc["tools"]}
    assert "mcp__echo__echo" in tools
    assert tools["mcp__echo__search"] == {
        "name": "mcp__echo__search",
        "description": "Search with options.",
        "parameters": SEARCH_SCHEMA,
    }


def test_dsh_prompt_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompt", str(deployment(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "You use MCP tools." in out
    assert '"name": "mcp__echo__pid"' in out
