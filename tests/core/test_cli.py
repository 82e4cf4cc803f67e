"""The dsh command line, in-process through main(argv) and once as a real subprocess."""

from __future__ import annotations

import io
import json
import logging
import shutil
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


# -- agents: run, prompt and check --------------------------------------------------------

ECHO = Path(__file__).parents[2] / "examples" / "echo-agent" / "dsh.yml"


def echo_deployment(tmp_path: Path, core: str, extra: str = "") -> Path:
    """The echo example's model and tool with another agent-core config."""
    for name in ("mock_model.py", "echo_tool.py"):
        shutil.copy(ECHO.parent / name, tmp_path / name)
    return write(
        tmp_path,
        f"""\
        - {{id: model, name: ./mock_model.py}}
        - {{id: agent-core, name: agent-core, config: {core}}}
        - {{id: echo, name: ./echo_tool.py}}
        {extra}""",
    )


TWO_AGENTS = "{model: echo-mock, persona: 'On {{model}}.', agents: [{id: a}, {id: b}]}"


def test_run_one_shot(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", str(ECHO), "-p", "echo hello"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "The echo tool returned: hello\n"
    assert captured.err == '[tool] echo {"text": "hello"}\n[tool] echo -> hello\n'


def test_run_repl_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("echo hi\n/exit\n"))
    assert cli.main(["run", str(ECHO)]) == 0
    assert capsys.readouterr().out == "The echo tool returned: hi\n"
    monkeypatch.setattr("sys.stdin", io.StringIO("hello"))
    assert cli.main(["run", str(ECHO), "--agent", "main"]) == 0
    assert capsys.readouterr().out == "You said: hello. Try `echo <words>`.\n"


def test_run_with_unreadable_stdin_ends_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Unreadable:
        def isatty(self) -> bool:
            return False

        def readline(self) -> str:
            raise OSError("reading from stdin while output is captured")

    monkeypatch.setattr("sys.stdin", Unreadable())
    assert cli.main(["run", str(ECHO)]) == 0
    assert capsys.readouterr() == ("", "")
    monkeypatch.setattr("sys.stdin", None)  # `dsh run FILE <&-`
    assert cli.main(["run", str(ECHO)]) == 0
    assert capsys.readouterr() == ("", "")


def test_run_picks_the_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = echo_deployment(tmp_path, TWO_AGENTS)
    assert cli.main(["run", str(path), "-p", "hi"]) == 1
    assert capsys.readouterr().err == (
        'several agents are running ("a", "b"): name one '
        '(dsh run --agent ID, or the stdio-agent config key "agent")\n'
    )
    assert cli.main(["run", str(path), "--agent", "b", "-p", "hi"]) == 0
    assert capsys.readouterr().out == "You said: hi. Try `echo <words>`.\n"
    assert cli.main(["run", str(path), "--agent", "c", "-p", "hi"]) == 1
    assert capsys.readouterr().err == 'unknown agent "c"; known agents: "a", "b"\n'


def test_run_uses_the_deployment_front_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = "- {id: chat, name: stdio-agent, config: {agent: b}}\n"
    path = echo_deployment(tmp_path, TWO_AGENTS, extra)
    assert cli.main(["run", str(path), "-p", "echo from b"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: from b\n"


def test_run_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", str(HELLO), "-p", "hi"]) == 1
    assert capsys.readouterr().err == (
        f"{HELLO}: there is no agent to talk to (the deployment does not load "
        "agent-core, or the agents/sessions/system-prompt services)\n"
    )
    broken = write(tmp_path, "- {name: nothing-like-this}\n")
    assert cli.main(["run", str(broken), "-p", "hi"]) == 1
    assert 'unknown plugin "nothing-like-this"' in capsys.readouterr().err


def test_run_reports_a_failed_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = echo_deployment(tmp_path, "{model: unknown-model}")
    assert cli.main(["run", str(path), "-p", "hi"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("[error] ")
    assert "unknown-model" in err


def test_ctrl_c_while_loading(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "load_deployment", interrupted)
    assert cli.main(["run", str(ECHO)]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_check_renders_each_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", str(ECHO)]) == 0
    assert capsys.readouterr().out == (
        f'{ECHO}: ok (3 plugin entries active, prompt renders for agent "main" (1 tools))\n'
    )
    path = echo_deployment(tmp_path, TWO_AGENTS)
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().out == (
        f"{path}: ok (3 plugin entries active, prompt renders for agents "
        '"a" (1 tools), "b" (1 tools))\n'
    )
    assert cli.main(["check", str(path), "--agent", "b"]) == 0
    assert capsys.readouterr().out.endswith('prompt renders for agent "b" (1 tools))\n')
    assert cli.main(["check", str(path), "--agent", "z"]) == 1
    assert capsys.readouterr().err == 'unknown agent "z"; known agents: "a", "b"\n'


def test_check_names_the_agent_section_and_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    core = "{model: echo-mock, persona: 'On {{model}}, {{typo}}.', agents: [{id: a}, {id: b}]}"
    path = echo_deployment(tmp_path, core)
    assert cli.main(["check", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    for line, agent in zip(err, "ab", strict=True):
        assert line.startswith(
            f'{path}: the system prompt of agent "{agent}" does not render: '
            'unknown prompt variable "{{typo}}" in section "deployment:persona"'
        )


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
    path = write(tmp_path, "- {id: sp, name: system-prompt, config: {persona: 'On {{modle}}.'}}\n")
    assert cli.main(["prompt", str(path)]) == 1
    assert capsys.readouterr().err == (
        'unknown prompt variable "{{modle}}" in section "deployment:persona"; '
        "registered variables: (none)\n"
    )


# -- stored sessions: dsh sessions and dsh run --resume ------------------------------------


def test_sessions_and_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    extra = "- {id: store, name: session-jsonl, config: {root: stored}}\n"
    path = echo_deployment(tmp_path, "{model: echo-mock}", extra)
    assert cli.main(["sessions", str(path)]) == 0
    assert capsys.readouterr().out == "no stored sessions\n"
    assert cli.main(["run", str(path), "-p", "echo one"]) == 0
    capsys.readouterr()
    assert cli.main(["sessions", str(path)]) == 0
    line = capsys.readouterr().out
    session_id = line.split()[0]
    assert "  1 turn  agent main  model echo-mock" in line
    assert "interrupted" not in line
    assert cli.main(["run", str(path), "--resume", session_id, "-p", "echo two"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "The echo tool returned: two\n"
    assert f'resumed session {session_id} (1 turn) as agent "main"' in captured.err
    assert cli.main(["sessions", str(path)]) == 0
    assert "  2 turns  agent main" in capsys.readouterr().out
    # A session whose file cannot be read is listed as such; an unknown id fails.
    broken = tmp_path / "stored" / "broken"
    broken.mkdir()
    (broken / "session.jsonl").write_text("not json\n")
    assert cli.main(["sessions", str(path)]) == 0
    assert "broken  unreadable: " in capsys.readouterr().out
    assert cli.main(["run", str(path), "--resume", "nope", "-p", "hi"]) == 1
    assert 'no stored session "nope"' in capsys.readouterr().err


def test_sessions_describe_open_turns_and_cwd() -> None:
    from types import SimpleNamespace

    item = SimpleNamespace(
        id="s1",
        error=None,
        last_activity=None,
        meta={},
        turns=1,
        cwd="/srv/app",
        open=True,
    )
    assert cli._describe_session(item) == (
        "s1  -  1 turn  agent -  model -  cwd /srv/app  last turn interrupted (closed on resume)"
    )


def test_sessions_and_resume_need_their_plugins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["sessions", str(HELLO)]) == 1
    assert capsys.readouterr().err == (
        f"{HELLO}: no session persistence is configured (add session-jsonl)\n"
    )
    assert cli.main(["run", str(HELLO), "--resume", "s1"]) == 1
    assert capsys.readouterr().err == f"{HELLO}: --resume needs agents (load agent-core)\n"
    broken = write(tmp_path, "- {name: nothing-like-this}\n")
    assert cli.main(["sessions", str(broken)]) == 1
    assert 'unknown plugin "nothing-like-this"' in capsys.readouterr().err


def test_config_types_read_like_python() -> None:
    from typing import Annotated, Literal

    from pydantic import Field

    assert cli._type_name(int) == "int"
    assert cli._type_name(type(None)) == "None"
    assert cli._type_name(list[str] | None) == "list[str] | None"
    assert cli._type_name(Annotated[str, Field(min_length=1)]) == "str"
    assert cli._type_name(dict[str, list[int]]) == "dict[str, list[int]]"
    assert cli._type_name(Literal["a", "b"]) == "Literal['a', 'b']"
    assert cli._type_name("Forward") == "'Forward'"
