"""What ``dsh check`` and ``dsh run`` say about session stores that cannot work, and
how ``dsh sessions`` lists a session whose committed history is damaged (issue 23)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from dsh import ConfigError, Context, cli
from dsh.testing import write_deployment
from dsh_session import Sessions, SessionStoreConflictError, directory_problem
from dsh_session_jsonl import JsonlSessions
from dsh_session_jsonl import _log as jsonl_log
from tests.support import ECHO

JSONL = "- {id: jsonl, name: session-jsonl, config: {root: stored}}"
SQLITE = "- {id: sqlite, name: session-sqlite, config: {path: stored.db}}"


def deployment(directory: Path, *stores: str) -> Path:
    """The echo agent (its scripted model and tool) with ``stores``, one line each
    (so the first store is on line 4)."""
    for name in ("mock_model.py", "echo_tool.py"):
        shutil.copy(ECHO.parent / name, directory / name)
    lines = [
        "- {id: model, name: ./mock_model.py}",
        "- {id: agent-core, name: agent-core, config: {model: echo-mock}}",
        "- {id: echo, name: ./echo_tool.py}",
        *stores,
    ]
    return write_deployment(directory, "\n".join(lines) + "\n")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = cli.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# -- two stores ---------------------------------------------------------------------------


def test_two_session_stores_are_one_located_error_at_check_and_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path = deployment(tmp_path, JSONL, SQLITE)
    for args in (["check", str(path)], ["run", str(path), "-p", "echo hi"]):
        status, out, err = run(capsys, *args)
        assert (status, out) == (1, "")
        lines = err.splitlines()
        assert lines[0] == f"deployment {path} has 1 problem:"
        assert len(lines) == 2
        # Whichever of the two started first holds the store; the line names both.
        assert f"{path}:4: entry 'jsonl'" in lines[1]
        assert f"{path}:5: entry 'sqlite'" in lines[1]
        assert "SessionStoreConflictError" in lines[1]
        assert "a deployment loads one session store" in lines[1]
    # Nothing was stored anywhere.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dsh.yml",
        "echo_tool.py",
        "mock_model.py",
    ]


@pytest.mark.anyio
async def test_one_backend_per_store_and_the_claim_goes_with_its_plugin(tmp_path: Path) -> None:
    async with Context() as root:
        await root.plugin(Sessions)
        first = await root.plugin(JsonlSessions, {"root": str(tmp_path / "a")})
        second = root.plugin(JsonlSessions, {"root": str(tmp_path / "b")})
        await second.settled()
        assert isinstance(second.error, SessionStoreConflictError)
        assert str(second.error).startswith(
            'the sessions are already persisted by plugin "session-jsonl": '
        )
        await first.dispose()
        third = await root.plugin(JsonlSessions, {"root": str(tmp_path / "c")})
        assert third.error is None
        # Nothing persists a store without a backend: nothing is unsaved either.
        await third.dispose()
        session = root.sessions.create()
        assert root.sessions.flush(session) == []


# -- paths that cannot work ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("store", "problem"),
    [
        (
            "- {id: jsonl, name: session-jsonl, config: {root: taken}}",
            'session-jsonl root "{base}/taken" cannot be used: {base}/taken is a regular '
            "file, not a directory",
        ),
        (
            "- {id: jsonl, name: session-jsonl, config: {root: taken/sessions}}",
            'session-jsonl root "{base}/taken/sessions" cannot be used: {base}/taken is a '
            "regular file, so no directory can be made under it",
        ),
        (
            "- {id: sqlite, name: session-sqlite, config: {path: taken/deep/s.db}}",
            'session-sqlite path "{base}/taken/deep/s.db" cannot be used: its folder cannot '
            "hold it ({base}/taken is a regular file, so no directory can be made under it)",
        ),
        (
            "- {id: sqlite, name: session-sqlite, config: {path: folder}}",
            'session-sqlite path "{base}/folder" cannot be used: it is a directory, not a '
            "database file",
        ),
        (
            "- {id: sqlite, name: session-sqlite, config: {path: s.db}}",
            'session-sqlite path "{base}/s.db" cannot be used: its lock folder '
            "{base}/s.db-locks is not a directory",
        ),
        (
            "- {id: sqlite, name: session-sqlite, config: {path: '~nobody-here/s.db'}}",
            'session-sqlite path "~nobody-here/s.db" cannot be used: its ~ cannot be '
            "expanded (Could not determine home directory.)",
        ),
    ],
    ids=[
        "jsonl-root-file",
        "jsonl-under-file",
        "sqlite-under-file",
        "sqlite-dir",
        "sqlite-locks",
        "sqlite-no-such-user",
    ],
)
def test_a_store_path_that_cannot_work_fails_check_and_run_naming_key_and_path(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    store: str,
    problem: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("a file\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "s.db-locks").write_text("a file\n")
    path = deployment(tmp_path, store)
    expected = f"deployment {path} has 1 problem:\n{path}:4: {problem.format(base=tmp_path)}\n"
    for args in (["check", str(path)], ["run", str(path), "-p", "echo hi"]):
        assert run(capsys, *args) == (1, "", expected)


def test_a_missing_store_folder_that_can_be_made_is_made_by_the_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for top, store in (
        ("new", "- {id: jsonl, name: session-jsonl, config: {root: new/deep/sessions}}"),
        ("other", "- {id: sqlite, name: session-sqlite, config: {path: other/deep/s.db}}"),
    ):
        path = deployment(tmp_path, store)
        status, out, _ = run(capsys, "check", str(path))
        assert (status, out.startswith(f"{path}: ok")) == (0, True)
        assert not (tmp_path / top).exists()  # checking writes nothing
        assert run(capsys, "run", str(path), "-p", "echo hi")[0] == 0
    assert len(list((tmp_path / "new" / "deep" / "sessions").iterdir())) == 1
    assert (tmp_path / "other" / "deep" / "s.db").is_file()


def test_directory_problem_names_what_is_in_the_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert directory_problem(tmp_path / "missing" / "deeper") is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert directory_problem(fifo) == f"{fifo} is not a directory, not a directory"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere" / "x")
    assert directory_problem(dangling / "sessions") == f"{dangling} is a symbolic link to nothing"
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert directory_problem(loop).startswith(f"{loop} cannot be examined (")  # type: ignore[union-attr]
    # Root may write anywhere: another user's view of a read-only folder, simulated.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert directory_problem(tmp_path / "x") == f"{tmp_path} is not writable by this process"


@pytest.mark.anyio
async def test_a_store_started_in_code_names_the_key_without_a_location(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file\n")
    async with Context() as root:
        await root.plugin(Sessions)
        fiber = root.plugin(JsonlSessions, {"root": str(tmp_path / "taken")})
        await fiber.settled()
    assert isinstance(fiber.error, ConfigError)
    assert str(fiber.error) == (
        f'session-jsonl root "{tmp_path}/taken" cannot be used: {tmp_path}/taken is a '
        "regular file, not a directory"
    )


# -- a run that loses records -------------------------------------------------------------


def test_a_run_whose_records_cannot_be_stored_fails_and_says_how_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The disk fills up when the turn's end is written: the turn completed, but the
    session on disk is short of it. The run says so last and exits 1."""
    monkeypatch.chdir(tmp_path)
    path = deployment(tmp_path, JSONL)
    write_all = jsonl_log._write_all

    def full_at_the_end(fd: int, data: bytes) -> None:
        if b'"turn/end"' in data:
            raise OSError(errno.ENOSPC, "No space left on device")
        write_all(fd, data)

    monkeypatch.setattr(jsonl_log, "_write_all", full_at_the_end)
    status, out, err = run(capsys, "run", str(path), "-p", "echo hi")
    assert (status, out) == (1, "The echo tool returned: hi\n")
    session_id = next((tmp_path / "stored").iterdir()).name
    lines = err.splitlines()
    assert f"session: {session_id}" in lines
    lost = [line for line in lines if line.startswith("[lost] ")]
    assert lost == [
        f"[lost] 1 record of session {session_id} could not be stored: "
        f"cannot write session file {tmp_path}/stored/{session_id}/session.jsonl: [Errno 28] "
        "No space left on device; it was cut back to its last good length "
        f"({(tmp_path / 'stored' / session_id / 'session.jsonl').stat().st_size} bytes) and "
        "the next commit writes the 1 buffered record(s) again"
    ]
    assert lines.index(lost[0]) > lines.index(f"session: {session_id}")
    # Once the disk has room again, nothing is lost and the run succeeds.
    monkeypatch.setattr(jsonl_log, "_write_all", write_all)
    status, _, err = run(capsys, "run", str(path), "-p", "echo again")
    assert status == 0
    assert "[lost]" not in err


# -- damaged sessions in the listing ------------------------------------------------------


def test_sessions_lists_a_damaged_middle_line_as_damaged_and_an_opaque_one_as_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path = deployment(tmp_path, JSONL)
    assert run(capsys, "run", str(path), "-p", "echo hi")[0] == 0
    session_id = next((tmp_path / "stored").iterdir()).name
    file = tmp_path / "stored" / session_id / "session.jsonl"
    lines = file.read_text().splitlines(keepends=True)
    # A record of a type nobody declares, in the middle: history, listed as normal.
    opaque = json.loads(lines[2]) | {"type": "plugin/gone", "data": {"any": 1}}
    file.write_text("".join([*lines[:2], json.dumps(opaque) + "\n", *lines[3:]]))
    status, out, _ = run(capsys, "sessions", str(path))
    assert (status, out.startswith(f"{session_id}  ")) == (0, True)
    assert "unreadable" not in out
    # A line that is not an event, with a committed turn end after it: damaged.
    file.write_text("".join([*lines[:2], "not json{\n", *lines[3:]]))
    status, out, _ = run(capsys, "sessions", str(path))
    assert status == 0
    assert out.startswith(
        f"{session_id}  unreadable: {file}: damaged at line 3: not JSON (Expecting value: "
    )
    assert f"it comes before the committed turn end on line {len(lines)}" in out
    status, _, err = run(capsys, "run", str(path), "--resume", session_id, "-p", "hi")
    assert status == 1
    assert f"{file}:3: not JSON" in err
    # The same line as the tail of a turn left open (no turn end after it): resuming
    # cuts it, so the listing shows the session as it will load.
    file.write_text("".join([*lines[:2], "not json{\n"]))
    status, out, _ = run(capsys, "sessions", str(path))
    assert "unreadable" not in out
    assert "last turn interrupted (closed on resume)" in out


def test_sessions_lists_a_damaged_sqlite_row_as_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path = deployment(tmp_path, SQLITE)
    assert run(capsys, "run", str(path), "-p", "echo hi")[0] == 0
    connection = sqlite3.connect(tmp_path / "stored.db")
    with connection:
        (session_id,) = connection.execute("SELECT id FROM sessions").fetchone()
        last = connection.execute("SELECT max(seq) FROM events").fetchone()[0]
        connection.execute("UPDATE events SET data = 'not json{' WHERE seq = 2")
    connection.close()
    status, out, _ = run(capsys, "sessions", str(path))
    assert status == 0
    assert out.startswith(
        f"{session_id}  unreadable: {tmp_path / 'stored.db'}: session '{session_id}', "
        "damaged at seq 2: data is not JSON (Expecting value: "
    )
    assert f"it comes before the committed turn end on seq {last}" in out
    status, _, err = run(capsys, "run", str(path), "--resume", session_id, "-p", "hi")
    assert status == 1
    assert f"session '{session_id}', seq 2: data is not JSON" in err
