"""The dsh command line, in-process through main(argv) and once as a real subprocess."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from dsh import cli

HELLO = Path(__file__).parents[2] / "examples" / "hello" / "dsh.yml"


@pytest.fixture(autouse=True)
def restore_dsh_logger() -> Iterator[None]:
    """main() configures the "dsh" logger for a terminal; undo it for other tests."""
    logger = logging.getLogger("dsh")
    saved = (logger.handlers[:], logger.propagate, logger.level)
    yield
    logger.handlers[:], logger.propagate, logger.level = saved[0], saved[1], saved[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dsh.yml"
    path.write_text(textwrap.dedent(text))
    return path


def test_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", str(HELLO)]) == 0
    out = capsys.readouterr().out
    assert out == f"{HELLO}: ok (1 plugin entries active, prompt renders (0 tools))\n"


def test_check_without_system_prompt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "noop.py").write_text("def apply(ctx, config):\n    return None\n")
    path = write(tmp_path, "- {id: noop, name: ./noop.py}\n")
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (1 plugin entries active)\n"


def test_check_reports_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        """\
        - id: sp
          name: system-prompt
          config: {persona: hi, tool_ordr: [a]}
        - name: sytem-prompt
        """,
    )
    assert cli.main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"deployment {path} has 2 problems:" in err
    assert "Extra inputs are not permitted (at tool_ordr)" in err
    assert f"{path}:4: entry 'sytem-prompt@4': unknown plugin \"sytem-prompt\"" in err
    assert "did you mean: system-prompt?" in err


def test_check_renders_the_prompt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "- {id: sp, name: system-prompt, config: {persona: 'On {{modle}}.'}}\n")
    assert cli.main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"{path}: the system prompt does not render: unknown prompt variable "
        '"{{modle}}" in section "deployment:persona"; registered variables: (none)\n'
    )


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
    path = write(tmp_path, "- {id: sp, name: system-prompt}\n- {id: tool, name: ./tool.py}\n")
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
    path = write(tmp_path, "- {id: noop, name: ./noop.py}\n")
    assert cli.main(["prompt", str(path)]) == 1
    assert capsys.readouterr().err == f"{path}: no system-prompt plugin is loaded\n"
    broken = write(tmp_path, "- {name: nothing-like-this}\n")
    assert cli.main(["prompt", str(broken)]) == 1
    assert 'unknown plugin "nothing-like-this"' in capsys.readouterr().err


def test_plugins_lists_installed(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "system-prompt  (dsh_system_prompt:SystemPrompt)\n" in out
    assert "    persona: str (default '')\n" in out
    assert "    tool_order: list[str] | None (default None)\n" in out


def test_plugins_edge_cases(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cli_probe_plugins.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel


            class Config(BaseModel):
                needed: int


            def with_config(ctx, config):
                return None


            with_config.Config = Config


            def bare(ctx, config):
                return None
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    group = "dsh.plugins"
    found = {
        "bare": EntryPoint("bare", "cli_probe_plugins:bare", group),
        "needs": EntryPoint("needs", "cli_probe_plugins:with_config", group),
        "gone": EntryPoint("gone", "cli_probe_missing_module:x", group),
    }
    monkeypatch.setattr(cli, "installed_plugins", lambda: found)
    assert cli.main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "bare  (cli_probe_plugins:bare)\n    (no config)\n" in out
    assert "needs  (cli_probe_plugins:with_config)\n    needed: int (required)\n" in out
    assert "gone  (cli_probe_missing_module:x)  cannot load: ModuleNotFoundError" in out
    monkeypatch.setattr(cli, "installed_plugins", dict)
    assert cli.main(["plugins"]) == 0
    assert "no plugins are installed" in capsys.readouterr().out


def test_verbose_logging_shows_tracebacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "boom.py").write_text("def apply(ctx, config):\n    raise RuntimeError('boom')\n")
    path = write(tmp_path, "- {id: boom, name: ./boom.py}\n")
    assert cli.main(["check", str(path)]) == 1
    brief = capsys.readouterr().err
    assert "ERROR dsh.boom: plugin 'boom' failed to start\n  RuntimeError: boom" in brief
    assert "Traceback" not in brief
    assert cli.main(["-v", "check", str(path)]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_console_script_runs_in_a_subprocess() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh", "check", str(HELLO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{HELLO}: ok")
