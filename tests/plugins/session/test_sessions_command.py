"""``dsh sessions`` and ``dsh run --resume``: the stored-session commands."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from dsh import cli
from dsh.testing import write_deployment
from dsh_llm import Usage
from dsh_session import TITLE_CHARS, describe_session, short_title
from tests.support import (
    EXAMPLES,
    HELLO,
    JSONL_STORE,
    echo_deployment,
    first_stored_session,
    run_dsh,
    run_dsh_into_closed_pipe,
    stored_echo_deployment,
)


def test_sessions_and_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stored_echo_deployment(tmp_path, monkeypatch)
    line = first_stored_session(path, capsys)
    session_id = line.split()[0]
    # The echo model reports 1 input token (one message) and 1 output token for its
    # tool call, then 10 and 5 (words) for "The echo tool returned: one".
    assert line.endswith(
        f'  1 turn  tokens 11 in / 6 out  agent main  model echo-mock  cwd {tmp_path}  "echo one"\n'
    )
    assert "interrupted" not in line
    # A unique start of the id is enough.
    assert cli.main(["run", str(path), "--resume", session_id[:6], "-p", "echo two"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "The echo tool returned: two\n"
    assert f'resumed session {session_id} (1 turn) as agent "main"' in captured.err
    assert captured.err.endswith(f"session: {session_id}\n")
    assert cli.main(["sessions", str(path)]) == 0
    assert "  2 turns  tokens 26 in / 12 out  agent main" in capsys.readouterr().out
    # A session whose file cannot be read is listed as such; an unknown id fails.
    broken = tmp_path / "stored" / "broken"
    broken.mkdir()
    (broken / "session.jsonl").write_text("not json\n")
    assert cli.main(["sessions", str(path)]) == 0
    assert "broken  unreadable: " in capsys.readouterr().out
    assert cli.main(["run", str(path), "--resume", "nope", "-p", "hi"]) == 1
    assert 'no stored session "nope"' in capsys.readouterr().err


def test_listing_and_the_prompt_need_no_model_credentials_but_check_and_run_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("DEEPSEEK_", "DSH_")):
            monkeypatch.delenv(name)
    example = EXAMPLES / "coding-agent" / "dsh.yml"
    lines = example.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "!env DEEPSEEK_API_KEY" in text)
    unset = f"{example}:{line}: entry 'llm': environment variable DEEPSEEK_API_KEY is not set"
    assert cli.main(["sessions", str(example)]) == 0
    assert capsys.readouterr() == (
        "no stored sessions\n",
        f"warning: {unset}: the entry is left out (dsh sessions calls no model)\n",
    )
    # The prompt needs no model either: the agent's model name is its own config.
    assert cli.main(["prompt", str(example)]) == 0
    shown = capsys.readouterr()
    assert shown.out.startswith("You are an AI agent powered by dsh.")
    assert "You are coding-agent, powered by deepseek-chat." in shown.out
    assert shown.err == f"warning: {unset}: the entry is left out (dsh prompt calls no model)\n"
    for command in (["check", str(example)], ["run", str(example), "-p", "hi"]):
        assert cli.main(command) == 1
        assert capsys.readouterr() == ("", f"deployment {example} has 1 problem:\n{unset}\n")


def test_sessions_describe_open_turns_cwd_title_and_tokens() -> None:
    item = SimpleNamespace(
        id="s1",
        error=None,
        last_activity=None,
        meta={},
        turns=1,
        cwd="/srv/app",
        open=True,
        title=None,
        usage=None,
    )
    assert describe_session(item) == (
        "s1  -  1 turn  tokens -  agent -  model -  cwd /srv/app  "
        "last turn interrupted (closed on resume)"
    )
    # A session stored without a cwd (older ones, or made in code) just omits it; so
    # does one whose first message is only whitespace.
    item.cwd, item.open, item.turns, item.title = None, False, 2, " \n "
    item.usage = Usage(1200, 30, cache_read_tokens=5)
    assert describe_session(item) == "s1  -  2 turns  tokens 1200 in / 30 out  agent -  model -"
    item.title = "review this\n\n<stdin>\n" + "word " * 20
    assert describe_session(item).endswith(
        '  "review this <stdin> word word word word word word word word…"'
    )
    assert short_title("short  and\tsweet") == "short and sweet"
    assert short_title("x" * 61) == "x" * 59 + "…"
    assert len(short_title("y" * 60)) == TITLE_CHARS


def test_resume_by_prefix_and_continue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stored_echo_deployment(tmp_path, monkeypatch)
    assert cli.main(["run", str(path), "--continue", "-p", "hi"]) == 1
    assert capsys.readouterr().err == (
        f"{path}: --continue: there is no stored session to continue (dsh sessions lists them)\n"
    )
    assert cli.main(["run", str(path), "-p", "echo first"]) == 0
    first = capsys.readouterr().err.splitlines()[-1].removeprefix("session: ")
    assert cli.main(["run", str(path), "-p", "echo second"]) == 0
    second = capsys.readouterr().err.splitlines()[-1].removeprefix("session: ")
    assert cli.main(["run", str(path), "-c", "-p", "echo third"]) == 0
    captured = capsys.readouterr()
    assert f'resumed session {second} (1 turn) as agent "main"' in captured.err
    assert cli.main(["run", str(path), "--continue", "-p", "echo fourth"]) == 0
    assert f"resumed session {second} (2 turns)" in capsys.readouterr().err
    # Sessions whose ids share a start: that start is ambiguous, a longer one is not.
    for sid in (first, second):
        (tmp_path / "stored" / sid).rename(tmp_path / "stored" / f"same{sid}")
        records = (tmp_path / "stored" / f"same{sid}" / "session.jsonl").read_text()
        (tmp_path / "stored" / f"same{sid}" / "session.jsonl").write_text(
            records.replace(f'"id":"{sid}"', f'"id":"same{sid}"', 1)
        )
    assert cli.main(["run", str(path), "--resume", "same", "-p", "hi"]) == 1
    ids = ", ".join(sorted(f"same{sid}" for sid in (first, second)))
    assert capsys.readouterr().err == (
        f'the session id prefix "same" is ambiguous: it starts {ids}; give more of the id\n'
    )
    assert cli.main(["run", str(path), "--resume", f"same{first[:4]}", "-p", "echo x"]) == 0
    assert f"resumed session same{first} (1 turn)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["run", str(path), "--continue", "--resume", "x"])
    assert info.value.code == 2
    assert "argument --resume: not allowed with argument -c/--continue" in (capsys.readouterr().err)


def test_sessions_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    path = echo_deployment(tmp_path, "{model: echo-mock}", JSONL_STORE)
    assert run_dsh("run", str(path), "-p", "echo hi", cwd=tmp_path).returncode == 0
    done = run_dsh_into_closed_pipe("sessions", str(path), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (128 + signal.SIGPIPE, "")


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


def test_continue_after_a_turn_that_got_no_answer_with_another_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stored_echo_deployment(tmp_path, monkeypatch, "unknown-model")
    assert cli.main(["run", str(path), "-p", "echo lost"]) == 1
    session_id = capsys.readouterr().err.splitlines()[-1].removeprefix("session: ")
    assert cli.main(["run", str(path), "--continue", "-m", "echo-mock", "-p", "echo x"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "The echo tool returned: x\n"
    assert (
        "the last turn ended before the model answered; its message is not part of the "
        "conversation (send it again if you still want it): 'echo lost'"
    ) in captured.err
    assert captured.err.endswith(f"session: {session_id}\n")


def test_sessions_describe_the_sessions_a_rewind_links() -> None:
    item = SimpleNamespace(
        id="s2",
        error=None,
        last_activity=None,
        meta={
            "rewound_from": {"session": "s1", "turn": 3},
            "rewound_to": [{"session": "s3", "turn": 1}, "junk", {"session": 4}],
        },
        turns=0,
        cwd=None,
        open=False,
        title=None,
        usage=None,
    )
    assert describe_session(item) == (
        "s2  -  0 turns  tokens -  agent -  model -  rewound from s1 (before turn 3)  "
        "rewound to s3 (before turn 1)"
    )
    # Links that are not {session, turn} (another writer's meta) are left out.
    item.meta = {"rewound_from": "s1", "rewound_to": {"session": "s3"}}
    assert describe_session(item) == "s2  -  0 turns  tokens -  agent -  model -"
    item.meta = {"rewound_to": ["junk"]}
    assert describe_session(item) == "s2  -  0 turns  tokens -  agent -  model -"
