"""``dsh run``: the command the terminal front-end package contributes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dsh import _commands, cli
from dsh.testing import write_deployment
from tests.support import ECHO, HELLO, TWO_AGENTS, echo_deployment, without_session_line


def test_run_one_shot(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", str(ECHO), "-p", "echo hello"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "The echo tool returned: hello\n"
    assert without_session_line(captured.err) == (  # the session id: what --resume takes
        '[tool] echo {"text": "hello"}\n[tool] echo -> hello\n'
    )


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


def front_end_deployment(tmp_path: Path, agent: str) -> Path:
    """Agents ``a`` and ``b``, and a stdio-agent entry that talks to ``agent``."""
    extra = f"- {{id: chat, name: stdio-agent, config: {{agent: {agent}}}}}\n"
    return echo_deployment(tmp_path, TWO_AGENTS, extra)


def test_run_uses_the_deployment_front_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = front_end_deployment(tmp_path, "b")
    assert cli.main(["run", str(path), "-p", "echo from b"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: from b\n"


def test_a_front_end_configured_for_an_undeclared_agent_fails_check_and_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = front_end_deployment(tmp_path, "nobody")
    expected = f'{path}:4: stdio-agent: agent "nobody" is not declared; known agents: "a", "b"\n'
    assert cli.main(["check", str(path)]) == 1
    assert capsys.readouterr() == ("", expected)
    assert cli.main(["run", str(path), "-p", "hi"]) == 1
    assert capsys.readouterr() == ("", expected)
    # An agent named on the command line is the one talked to.
    assert cli.main(["run", str(path), "--agent", "b", "-p", "hi"]) == 0
    assert capsys.readouterr().out == "You said: hi. Try `echo <words>`.\n"
    path = front_end_deployment(tmp_path, "b")
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"{path}: ok (4 plugin entries active, ")


def test_run_refuses_a_deployment_with_another_front_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = echo_deployment(tmp_path, TWO_AGENTS, "- {id: editor, name: acp}\n")
    assert cli.main(["run", str(path), "-p", "hi"]) == 1
    assert capsys.readouterr().err == (
        f'{path}: the deployment has another front-end ("acp"); dsh run talks through '
        "stdio-agent: remove that entry (or run the command it is for, such as dsh acp)\n"
    )


def test_run_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", str(HELLO), "-p", "hi"]) == 1
    assert capsys.readouterr().err == (
        f"{HELLO}: there is no agent to talk to (the deployment does not load "
        "agent-core, or the agents/sessions/system-prompt services)\n"
    )
    broken = write_deployment(tmp_path, "- {name: nothing-like-this}\n")
    assert cli.main(["run", str(broken), "-p", "hi"]) == 1
    assert 'unknown plugin "nothing-like-this"' in capsys.readouterr().err


def test_run_reports_a_failed_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = echo_deployment(tmp_path, "{model: unknown-model}")
    assert cli.main(["run", str(path), "-p", "hi"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("[error] ")
    assert "unknown-model" in err


def test_run_reports_a_turn_that_reached_its_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = echo_deployment(tmp_path, "{model: echo-mock, max_steps: 1}")
    assert cli.main(["run", str(path), "-p", "echo hello"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert without_session_line(captured.err).splitlines()[-1] == (
        "[error] the turn reached its limit of 1 steps "
        "(code MAX_STEPS; the agent config's max_steps sets it)"
    )
    path = echo_deployment(tmp_path, "{model: echo-mock, max_turn_tokens: 2}")
    assert cli.main(["run", str(path), "-p", "echo hello"]) == 1
    assert without_session_line(capsys.readouterr().err).splitlines()[-1] == (
        "[error] the turn reached its limit of 2 tokens (used 2) "
        "(code USAGE_LIMIT; the agent config's max_turn_tokens sets it)"
    )


def test_ctrl_c_while_loading(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_commands, "load_deployment", interrupted)
    assert cli.main(["run", str(ECHO)]) == 130
    assert capsys.readouterr().err == "interrupted\n"
