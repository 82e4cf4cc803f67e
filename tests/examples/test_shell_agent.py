"""The keyless shell example through the real ``dsh`` command: a scripted model runs a
command with the bash tool and answers with what it printed."""

from __future__ import annotations

from pathlib import Path

from tests.support import EXAMPLES, run_dsh, without_session_line

EXAMPLE = EXAMPLES / "shell-agent" / "dsh.yml"


def test_a_command_round_trips_through_the_bash_tool(tmp_path: Path) -> None:
    done = run_dsh("run", str(EXAMPLE), "-p", "run printf CLI_TOOL_ROUND_TRIP", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The command printed: CLI_TOOL_ROUND_TRIP\n"
    assert without_session_line(done.stderr) == (
        '[tool] bash {"command": "printf CLI_TOOL_ROUND_TRIP"}\n'
        "[tool] bash -> CLI_TOOL_ROUND_TRIP\n"
    )


def test_the_command_runs_in_the_working_directory(tmp_path: Path) -> None:
    done = run_dsh("run", str(EXAMPLE), "-p", "run pwd; exit 2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"The command printed: {tmp_path}\n[exit code: 2]\n"


def test_check_and_the_hint() -> None:
    checked = run_dsh("check", str(EXAMPLE))
    assert checked.returncode == 0, checked.stderr
    hint = run_dsh("run", str(EXAMPLE), "-p", "hello")
    assert hint.stdout == "Say `run <command>` and I will run it with bash.\n"
