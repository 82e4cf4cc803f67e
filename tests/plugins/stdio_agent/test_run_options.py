"""``dsh run``'s options: -p - and piped context, -m, --output json, the default
deployment file, exit statuses of piped runs, and a reader that goes away."""

from __future__ import annotations

import io
import json
import os
import signal
from pathlib import Path

import pytest

from dsh import cli
from dsh_stdio_agent._cli import piped_stdin, with_context
from tests.support import (
    ECHO,
    echo_deployment,
    run_dsh,
    run_dsh_into_closed_pipe,
    stored_echo_deployment,
    without_session_line,
)

#: The echo model's answer to a message that is not `echo ...`.
YOU_SAID = "You said: {}. Try `echo <words>`.\n"


def test_dash_p_dash_reads_the_message_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("echo from stdin\n"))
    assert cli.main(["run", str(ECHO), "-p", "-"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: from stdin\n"
    for empty in (io.StringIO(" \n"), None):
        monkeypatch.setattr("sys.stdin", empty)
        assert cli.main(["run", str(ECHO), "-p", "-"]) == 1
        assert capsys.readouterr() == ("", "dsh run: -p - read an empty message from stdin\n")


def test_piped_input_is_added_to_the_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    piped = tmp_path / "input.txt"
    piped.write_text("line one\nline two")
    with piped.open() as stdin:
        monkeypatch.setattr("sys.stdin", stdin)
        assert cli.main(["run", str(ECHO), "-p", "review this"]) == 0
    message = "review this\n\n<stdin>\nline one\nline two\n</stdin>"
    assert capsys.readouterr().out == YOU_SAID.format(message)
    piped.write_text("\n")
    with piped.open() as stdin:
        monkeypatch.setattr("sys.stdin", stdin)
        assert cli.main(["run", str(ECHO), "-p", "just this"]) == 0
    assert capsys.readouterr().out == YOU_SAID.format("just this")


def test_what_counts_as_piped_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", None)
    assert piped_stdin() is None
    monkeypatch.setattr("sys.stdin", io.StringIO("no descriptor"))
    assert piped_stdin() is None
    with open(os.devnull) as null:  # a character device, as a terminal is
        monkeypatch.setattr("sys.stdin", null)
        assert piped_stdin() is None
    read, write = os.pipe()
    os.write(write, b"through a pipe")
    os.close(write)
    with os.fdopen(read) as pipe:
        monkeypatch.setattr("sys.stdin", pipe)
        assert piped_stdin() == "through a pipe"
    assert with_context("p", "x\n") == "p\n\n<stdin>\nx\n</stdin>"
    assert with_context("p", " \n\t") == "p"


def test_piped_context_in_a_subprocess(tmp_path: Path) -> None:
    done = run_dsh("run", str(ECHO), "-p", "review this", stdin="def main():\n    pass\n")
    assert done.returncode == 0, done.stderr
    message = "review this\n\n<stdin>\ndef main():\n    pass\n</stdin>"
    assert done.stdout == YOU_SAID.format(message)
    assert without_session_line(done.stderr) == ""


def test_model_overrides_the_agents_model_and_the_header_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stored_echo_deployment(tmp_path, monkeypatch, "not-served")
    assert cli.main(["run", str(path), "-m", "echo-mock", "-p", "echo hi"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: hi\n"
    assert cli.main(["sessions", str(path)]) == 0
    assert "  agent main  model echo-mock  " in capsys.readouterr().out


def test_a_model_no_adapter_serves_is_refused_before_anything_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stored_echo_deployment(tmp_path, monkeypatch, "echo-mock")
    assert cli.main(["run", str(path), "-m", "gpt-9000", "-p", "hi"]) == 1
    assert capsys.readouterr() == (
        "",
        'no adapter serves model "gpt-9000"; known models: "echo-mock"\n',
    )
    assert list((tmp_path / "stored").rglob("*")) == []
    assert cli.main(["sessions", str(path)]) == 0
    assert capsys.readouterr().out == "no stored sessions\n"


def test_json_output_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", str(ECHO), "-p", "echo hi", "--output", "json"]) == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert {"seq", "type", "time", "data"} == set(records[0])
    assert [r["type"] for r in records][:3] == ["turn/start", "user/message", "step/start"]
    assert records[-1]["data"]["reason"] == {"kind": "completed"}
    assert without_session_line(captured.err) == '[tool] echo {"text": "hi"}\n[tool] echo -> hi\n'


def test_run_without_a_file_uses_dsh_yml_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "-p", "hi"]) == 1
    assert capsys.readouterr().err == (
        "dsh run: no deployment file given and there is no ./dsh.yml here (dsh run FILE)\n"
    )
    echo_deployment(tmp_path, "{model: echo-mock}")  # writes ./dsh.yml
    assert cli.main(["run", "-p", "echo here", "-v"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: here\n"


def test_a_failed_turn_fails_a_piped_run(tmp_path: Path) -> None:
    path = echo_deployment(tmp_path, "{model: unknown-model}")
    done = run_dsh("run", str(path), stdin="hi\n")
    assert done.returncode == 1
    assert done.stderr.startswith("[error] ")
    done = run_dsh("run", str(ECHO), stdin="echo a\necho b\n")
    assert done.returncode == 0
    assert done.stdout == "The echo tool returned: a\nThe echo tool returned: b\n"


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_reader_that_goes_away_ends_a_run_quietly(output: str) -> None:
    done = run_dsh_into_closed_pipe("run", str(ECHO), "-p", "hello", "--output", output)
    assert "Traceback" not in done.stderr
    assert "Broken pipe" not in done.stderr
    assert done.returncode == 128 + signal.SIGPIPE


def test_a_terminal_repl_does_not_name_its_session(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("echo typed\n"))
    assert cli.main(["run", str(ECHO)]) == 0
    captured = capsys.readouterr()
    assert "The echo tool returned: typed\n" in captured.out
    assert "session:" not in captured.err
