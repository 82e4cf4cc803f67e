"""The dsh command line's core: the dispatcher, ``check`` and ``plugins``.

In-process through ``main(argv)``, and once as a real subprocess.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import types
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import dsh
from dsh import Command, _commands, _startup, cli
from dsh.testing import write_deployment
from tests.support import ECHO, HELLO, TWO_AGENTS, echo_deployment, run_dsh_into_closed_pipe


def test_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", str(HELLO)]) == 0
    out = capsys.readouterr().out
    assert out == f"{HELLO}: ok (1 plugin entry active, prompt renders (0 tools))\n"


def test_check_without_system_prompt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "noop.py").write_text("def apply(ctx, config):\n    return None\n")
    path = write_deployment(tmp_path, "- {id: noop, name: ./noop.py}\n")
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (1 plugin entry active)\n"


def test_check_reports_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_deployment(
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
    path = write_deployment(
        tmp_path, "- {id: sp, name: system-prompt, config: {persona: 'On {{modle}}.'}}\n"
    )
    assert cli.main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"{path}: the system prompt does not render: unknown prompt variable "
        '"{{modle}}" in section "deployment:persona"; registered variables: (none)\n'
    )


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
    path = write_deployment(tmp_path, "- {id: boom, name: ./boom.py}\n")
    assert cli.main(["check", str(path)]) == 1
    brief = capsys.readouterr().err
    # The failure is printed once: the deployment's located line, no log record too.
    assert brief == (
        f"deployment {path} has 1 problem:\n"
        f"{path}:1: entry 'boom': plugin \"boom\" failed: RuntimeError: boom\n"
    )
    assert cli.main(["-v", "check", str(path)]) == 1
    verbose = capsys.readouterr().err
    assert "DEBUG dsh.boom: plugin 'boom' failed to start" in verbose
    assert "Traceback (most recent call last)" in verbose


def test_console_script_runs_in_a_subprocess() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh", "check", str(HELLO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{HELLO}: ok")


def test_check_renders_each_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", str(ECHO)]) == 0
    assert capsys.readouterr().out == (
        f'{ECHO}: ok (3 plugin entries active, prompt renders for agent "main" (1 tool))\n'
    )
    path = echo_deployment(tmp_path, TWO_AGENTS)
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().out == (
        f"{path}: ok (3 plugin entries active, prompt renders for agents "
        '"a" (1 tool), "b" (1 tool))\n'
    )
    assert cli.main(["check", str(path), "--agent", "b"]) == 0
    assert capsys.readouterr().out.endswith('prompt renders for agent "b" (1 tool))\n')
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


# -- commands from entry points -----------------------------------------------------------

GREET = """\
from dsh import Command


def configure(parser):
    parser.add_argument("who")


def run(args):
    print(f"hello, {args.who}")
    return 7


command = Command(help="greet someone (a third-party command)", configure=configure, run=run)
not_a_command = 42
"""


def install_throwaway_package(site: Path, entry_points: str) -> Path:
    """A package ``dsh_greet`` with a ``.dist-info`` declaring ``entry_points``, as
    ``pip install`` would leave it in ``site``."""
    (site / "dsh_greet").mkdir(parents=True)
    (site / "dsh_greet" / "__init__.py").write_text(GREET)
    info = site / "dsh_greet-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dsh-greet\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    return site


GREET_ENTRY_POINTS = """\
    [dsh.commands]
    greet = dsh_greet:command
    broken = dsh_greet_missing:command
    wrong = dsh_greet:not_a_command
    check = dsh_greet:command
    """


def test_help_lists_every_installed_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for name, help_line in [
        ("check", "load a deployment and report every problem"),
        ("plugins", "list installed plugins and their config keys"),
        ("prompt", "print the system prompt and tools the model would receive"),
        ("run", "chat with the deployment's agent (REPL, or -p once)"),
        ("sessions", "list the sessions the deployment has stored"),
    ]:
        assert re.search(rf"^ +{name} +{re.escape(help_line)}$", out, re.MULTILINE), name


def test_a_third_party_command_plugs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    site = install_throwaway_package(tmp_path / "site", GREET_ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert re.search(r"^ +greet +greet someone \(a third-party command\)$", out, re.MULTILINE)
    # A broken entry point is listed by name with its reason; the others still work.
    assert re.search(r"^ +broken +\(cannot load: ModuleNotFoundError\)$", out, re.MULTILINE)
    assert re.search(r"^ +wrong +\(cannot load: not a dsh.Command\)$", out, re.MULTILINE)
    assert cli.main(["greet", "world"]) == 7
    assert capsys.readouterr().out == "hello, world\n"
    assert cli.main(["broken", "x", "--y"]) == 1
    assert capsys.readouterr().err.startswith(
        'dsh: command "broken" (dsh_greet_missing:command) cannot load: ModuleNotFoundError: '
    )
    assert cli.main(["wrong"]) == 1
    assert capsys.readouterr().err == (
        'dsh: command "wrong" (dsh_greet:not_a_command) is int, not a dsh.Command\n'
    )
    # The core's own commands cannot be replaced by an entry point.
    assert cli.main(["check", str(HELLO)]) == 0
    assert capsys.readouterr().out.startswith(f"{HELLO}: ok")


def test_a_third_party_command_in_a_subprocess(tmp_path: Path) -> None:
    site = install_throwaway_package(tmp_path / "site", GREET_ENTRY_POINTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "dsh", "greet", "subprocess"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert (done.returncode, done.stdout) == (7, "hello, subprocess\n"), done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "dsh", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert "greet someone (a third-party command)" in done.stdout


def test_only_the_named_command_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[str] = []
    real = _commands.load_command

    def spy(entry_point: EntryPoint) -> Command:
        loaded.append(entry_point.name)
        return real(entry_point)

    monkeypatch.setattr(cli, "load_command", spy)
    assert cli.main(["check", str(HELLO)]) == 0
    assert loaded == []
    assert cli.main(["prompt", str(HELLO)]) == 0
    assert loaded == ["prompt"]


def test_a_broken_pipe_in_process_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def gone(args: object) -> int:
        raise BrokenPipeError

    broken = Command(help="writes to a pipe nobody reads", configure=lambda p: None, run=gone)
    monkeypatch.setitem(cli._CORE, "plugins", broken)
    assert cli.main(["plugins"]) == 128 + signal.SIGPIPE
    assert capsys.readouterr().err == ""


def test_a_deployment_command_run_off_the_main_thread_skips_signals() -> None:
    statuses: list[int] = []

    async def body(root: dsh.Context, deployment: dsh.Fiber) -> int:
        return 5

    worker = threading.Thread(
        target=lambda: statuses.append(dsh.run_deployment_command(HELLO, body))
    )
    worker.start()
    worker.join(30)
    assert statuses == [5]


def test_errors_logged_without_verbose_show_one_line_per_exception(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "undo.py").write_text(
        "def apply(ctx, config):\n"
        "    def undo():\n"
        "        raise RuntimeError('undo failed')\n"
        "    return undo\n"
    )
    path = write_deployment(tmp_path, "- {id: undo, name: ./undo.py}\n")
    assert cli.main(["check", str(path)]) == 0
    err = capsys.readouterr().err
    assert (
        'ERROR dsh.undo: plugin "undo": error while disposing it\n  RuntimeError: undo failed'
        in err
    )
    assert "Traceback" not in err


# -- options every command takes, counts, closed pipes ----------------------------------


def test_version(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"dsh {importlib.metadata.version('dsh-harness')}\n"

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert cli.version() == "unknown"


@pytest.mark.parametrize(
    "words", [["-v", "check", "{path}"], ["check", "{path}", "-v"], ["check", "-v", "{path}"]]
)
def test_verbose_goes_before_or_after_the_command(
    words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "boom.py").write_text("def apply(ctx, config):\n    raise RuntimeError('boom')\n")
    path = write_deployment(tmp_path, "- {id: boom, name: ./boom.py}\n")
    assert cli.main([word.format(path=path) for word in words]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_counts_agree_in_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dsh.counted(1, "plugin entry", "plugin entries") == "1 plugin entry"
    assert dsh.counted(0, "plugin entry", "plugin entries") == "0 plugin entries"
    assert dsh.counted(2, "tool") == "2 tools"
    (tmp_path / "noop.py").write_text("def apply(ctx, config):\n    return None\n")
    path = write_deployment(tmp_path, "- {id: a, name: ./noop.py}\n- {id: b, name: ./noop.py}\n")
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (2 plugin entries active)\n"


def test_a_broken_pipe_raised_in_a_task_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def gone(args: object) -> int:
        raise ExceptionGroup("a task group", [BrokenPipeError()])

    def failed(args: object) -> int:
        raise ExceptionGroup("a task group", [BrokenPipeError(), ValueError("real")])

    monkeypatch.setitem(cli._CORE, "plugins", Command("gone", lambda p: None, gone))
    assert cli.main(["plugins"]) == 128 + signal.SIGPIPE
    monkeypatch.setitem(cli._CORE, "plugins", Command("failed", lambda p: None, failed))
    with pytest.raises(ExceptionGroup) as info:
        cli.main(["plugins"])
    assert info.group_contains(ValueError, match="real")
    assert capsys.readouterr().err == ""


def test_output_flushed_at_exit_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """Without ``PYTHONUNBUFFERED`` the answer of a command that printed and returned
    is still in the buffer when ``main`` returns: it is written there, not at exit."""
    site = install_throwaway_package(tmp_path / "site", GREET_ENTRY_POINTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    env.pop("PYTHONUNBUFFERED", None)
    done = run_dsh_into_closed_pipe("greet", "nobody", env=env)
    assert done.stderr == ""
    assert done.returncode == 128 + signal.SIGPIPE


@pytest.mark.parametrize(
    "words", [["plugins"], ["prompt", str(ECHO)], ["check", str(ECHO)]], ids=lambda w: w[0]
)
def test_every_command_into_a_closed_pipe_ends_quietly(words: list[str]) -> None:
    done = run_dsh_into_closed_pipe(*words)
    assert done.stderr == ""
    assert done.returncode == 128 + signal.SIGPIPE


def test_commands_default_to_dsh_yml_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for command in ("check", "prompt", "sessions"):
        assert cli.main([command]) == 1
        assert capsys.readouterr().err == (
            f"dsh {command}: no deployment file given and there is no ./dsh.yml here "
            f"(dsh {command} FILE)\n"
        )
    (tmp_path / "dsh.yml").write_text(HELLO.read_text())
    assert cli.main(["check"]) == 0
    assert capsys.readouterr().out.startswith("dsh.yml: ok (1 plugin entry active")
    assert cli.main(["prompt"]) == 0
    assert capsys.readouterr().out.startswith("You are an AI agent powered by dsh.")
    assert cli.main(["sessions"]) == 1
    assert capsys.readouterr().err.startswith("dsh.yml: no session persistence")


@pytest.mark.parametrize("running", [True, False])
def test_collection_paused_turns_the_collector_off_and_back_as_it_was(running: bool) -> None:
    was = gc.isenabled()
    (gc.enable if running else gc.disable)()
    try:
        with _startup.collection_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is running
    finally:
        (gc.enable if was else gc.disable)()


def test_loading_and_the_command_import_run_with_the_collector_paused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[str, bool]] = []
    installed = _commands.installed_commands
    load = dsh.load_deployment

    def spy_installed() -> dict[str, EntryPoint]:
        seen.append(("command", gc.isenabled()))
        return installed()

    async def spy_load(path: Path, root: dsh.Context) -> dsh.Fiber:
        seen.append(("load", gc.isenabled()))
        return await load(path, root)

    monkeypatch.setattr(cli, "installed_commands", spy_installed)
    monkeypatch.setattr(_commands, "load_deployment", spy_load)

    async def body(root: dsh.Context, deployment: dsh.Fiber) -> int:
        seen.append(("body", gc.isenabled()))
        return 0

    assert cli.main(["prompt", str(HELLO)]) == 0
    assert _commands.run_deployment_command(HELLO, body) == 0
    assert _commands.run_deployment_command(HELLO, body, calls_no_model="sessions") == 0
    on = gc.isenabled()
    assert seen == [
        ("command", False),
        ("load", False),
        ("load", False),
        ("body", on),
        ("load", False),
        ("body", on),
    ]
    capsys.readouterr()


def test_the_console_script_imports_the_command_line_with_the_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []
    stand_in = types.ModuleType("dsh.cli")

    def attribute(name: str) -> Callable[[], int]:
        seen.append(gc.isenabled())  # while `from .cli import main` runs
        return lambda: 7

    stand_in.__getattr__ = attribute  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "dsh.cli", stand_in)
    assert _startup.main() == 7
    assert seen
    assert not any(seen)
