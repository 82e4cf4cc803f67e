"""``dsh rewind FILE --session ID --turn N`` and ``dsh checkpoints gc [FILE]``."""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio
import pytest

from dsh.testing import run_turn, write_deployment
from dsh_checkpoints._cli import gc_command, rewind_command
from dsh_session._cli import command as sessions_command
from dsh_session_jsonl import JsonlSessions
from tests.plugins.checkpoints.ckpt_support import runtime, write_turn

MODEL = """\
from dsh.testing import ScriptedModel

inject = ["llm"]


def apply(ctx, config):
    return ScriptedModel().install(ctx)
"""


def deployment(tmp_path: Path, workspace: Path, *, checkpoints: bool = True) -> Path:
    (tmp_path / "model.py").write_text(MODEL)
    lines = [
        "- {id: model, name: ./model.py}",
        "- id: core",
        "  name: agent-core",
        f"  config: {{agents: [{{id: main, model: scripted, cwd: '{workspace}'}}]}}",
        f"- {{id: store, name: session-jsonl, config: {{root: '{tmp_path / 'sessions'}'}}}}",
        "- {id: fs, name: fs}",
        "- {id: fs-local, name: fs-local}",
    ]
    if checkpoints:
        lines.append("- {id: checkpoints, name: checkpoints, config: {max_bytes: 1}}")
    return write_deployment(tmp_path, "\n".join(lines) + "\n")


def record(tmp_path: Path, workspace: Path) -> str:
    async def main() -> str:
        plugins = ((JsonlSessions, {"root": str(tmp_path / "sessions")}),)
        replies = [*write_turn("a.txt", "one"), *write_turn("a.txt", "two")]
        async with runtime(workspace, *replies, plugins=plugins) as root:
            agent = root.agents.get("main")
            await run_turn(agent, "first")
            await run_turn(agent, "second")
            return str(agent.session.id)

    return anyio.run(main)


def invoke(command: object, argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    command.configure(parser)  # type: ignore[attr-defined]
    code: int = command.run(parser.parse_args(argv))  # type: ignore[attr-defined]
    return code


def test_rewind_from_the_shell_then_collect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session_id = record(tmp_path, workspace)
    file = deployment(tmp_path, workspace)
    assert invoke(rewind_command, [str(file), "--session", session_id[:8], "--turn", "2"]) == 0
    out = capsys.readouterr().out
    assert (workspace / "a.txt").read_text() == "one"
    new_id = out.rsplit("--resume ", 1)[1].split(")")[0]
    assert f"rewound session {session_id} to before turn 2: new session {new_id}" in out
    stored = (tmp_path / "sessions" / new_id / "session.jsonl").read_text()
    assert '"rewound_from"' in stored
    # `dsh sessions` shows the link both ways.
    assert invoke(sessions_command, [str(file)]) == 0
    listing = capsys.readouterr().out
    assert f"rewound to {new_id} (before turn 2)" in listing
    assert f"rewound from {session_id} (before turn 2)" in listing
    monkeypatch.chdir(workspace)
    assert invoke(gc_command, ["gc", str(file)]) == 0
    assert "removed" in capsys.readouterr().out
    assert invoke(rewind_command, [str(file), "--session", "nope", "--turn", "1"]) == 1
    assert 'dsh rewind: no stored session "nope"' in capsys.readouterr().err


def test_commands_need_the_plugin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    file = deployment(tmp_path, workspace, checkpoints=False)
    assert invoke(rewind_command, [str(file), "--session", "x", "--turn", "1"]) == 1
    assert invoke(gc_command, ["gc", str(file)]) == 1
    assert capsys.readouterr().err.count("the deployment does not load checkpoints") == 2
