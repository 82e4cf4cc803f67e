"""``dsh prompt`` lists the MCP tools: the plugin is ACTIVE only once they are."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from dsh.cli import main
from dsh.testing import write_deployment
from tests.plugins.mcp.mcp_support import SERVER, mcp_deployment
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


def test_a_command_that_is_not_a_server_is_one_located_warning(tmp_path: Path) -> None:
    path = mcp_deployment(
        tmp_path,
        "      echoes: {command: cat}\n"
        "      talks:\n"
        "        command: sh\n"
        """        args: ["-c", "echo 'Usage: talks [options]'; cat > /dev/null"]\n""",
    )
    done = run_dsh("check", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f'WARNING dsh.mcp: {path}:7: MCP server "echoes" failed to start: not an MCP server '
        '(its first output line is the request "initialize", which only a client sends: '
        "does it repeat its input?)",
        f'WARNING dsh.mcp: {path}:8: MCP server "talks" failed to start: not an MCP server '
        '(its first output line is not JSON-RPC: "Usage: talks [options]")',
    ]


def test_a_servers_stderr_goes_to_its_log_and_to_the_terminal_with_v(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = mcp_deployment(
        tmp_path, f"      echo: {{command: {sys.executable}, args: [{SERVER}, --chatter]}}\n"
    )
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    quiet = run_dsh("check", str(path), cwd=tmp_path, env=env)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert quiet.stdout.startswith(f"{path}: ok")
    log = state / "dsh" / "mcp" / "echo.log"
    chatter = "INFO echo server starting\nINFO serving 15 tools"
    assert log.read_text(encoding="utf-8") == chatter
    verbose = run_dsh("check", str(path), "-v", cwd=tmp_path, env=env)
    assert verbose.returncode == 0, verbose.stderr
    lines = verbose.stderr.splitlines()
    assert 'DEBUG dsh.mcp: MCP server "echo": INFO echo server starting' in lines
    assert 'DEBUG dsh.mcp: MCP server "echo": INFO serving 15 tools' in lines
    assert log.read_text(encoding="utf-8") == chatter * 2  # appended, run after run
