"""``dsh sessions`` and ``dsh run --resume``: the stored-session commands."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from dsh import cli
from dsh.testing import write_deployment
from dsh_session._cli import describe_session
from tests.support import HELLO, echo_deployment


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
    item = SimpleNamespace(
        id="s1",
        error=None,
        last_activity=None,
        meta={},
        turns=1,
        cwd="/srv/app",
        open=True,
    )
    assert describe_session(item) == (
        "s1  -  1 turn  agent -  model -  cwd /srv/app  last turn interrupted (closed on resume)"
    )
    # A session stored without a cwd (older ones, or made in code) just omits it.
    item.cwd, item.open, item.turns = None, False, 2
    assert describe_session(item) == "s1  -  2 turns  agent -  model -"


def test_sessions_and_resume_need_their_plugins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["sessions", str(HELLO)]) == 1
    assert capsys.readouterr().err == (
        f"{HELLO}: no session persistence is configured (add session-jsonl)\n"
    )
    assert cli.main(["run", str(HELLO), "--resume", "s1"]) == 1
    assert capsys.readouterr().err == f"{HELLO}: --resume needs agents (load agent-core)\n"
    broken = write_deployment(tmp_path, "- {name: nothing-like-this}\n")
    assert cli.main(["sessions", str(broken)]) == 1
    assert 'unknown plugin "nothing-like-this"' in capsys.readouterr().err
