"""``session-jsonl`` details beyond the store contract (which runs against every store:
``tests/plugins/session_store``): the file layout, torn lines, unreadable files, the
root's config."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from dsh import ConfigError
from dsh_llm import Message
from dsh_session_jsonl import (
    FILE_NAME,
    FORMAT_VERSION,
    JsonlSessions,
    SessionExistsError,
    SessionIdError,
    SessionReadError,
    check_session_id,
)
from tests.plugins.session_jsonl.jsonl_support import file_records, jsonl_runtime, write_log
from tests.plugins.session_store.store_support import (
    events_of,
    json_records,
    located_from_home,
    turn,
)

pytestmark = pytest.mark.anyio


async def test_the_file_layout(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        assert plugin.root == tmp_path
        session = sessions.create(cwd="/project", meta={"agent": "main", "model": "m"})
        session.append("turn/start", {"turn": 1})
        assert not (tmp_path / session.id).exists()  # buffered
        session.append("user/message", {"turn": 1, "message": Message.user("hi").to_json()})
        path = tmp_path / session.id / FILE_NAME
        log = plugin.log_of(session.id)
        assert log is not None
        assert log.path == path
        assert log.length == path.stat().st_size
        assert repr(log).startswith("<SessionLog")
        assert list(path.parent.iterdir()) == [path]  # the temporary name is gone
        turn(session, 2)
    lines = file_records(path)
    assert lines[0] == {
        "type": "session",
        "version": FORMAT_VERSION,
        "id": session.id,
        "created_at": session.header.created_at,
        "cwd": "/project",
        "meta": {"agent": "main", "model": "m"},
    }
    assert lines[1:] == json_records(session)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


async def test_a_lone_surrogate_is_written_escaped(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create()
        text = "bad \ud800 surrogate"
        session.append("user/message", {"turn": 1, "message": Message.user(text).to_json()})
    raw = (tmp_path / session.id / FILE_NAME).read_text()
    assert "\\ud800" in raw
    assert json.loads(raw.splitlines()[1])["data"]["message"]["content"][0]["text"] == text


async def test_a_directory_without_a_published_file_is_no_session(tmp_path: Path) -> None:
    (tmp_path / "nofile").mkdir()
    async with jsonl_runtime(tmp_path) as (ctx, _, _):
        assert await ctx.serial("session/open", "nofile") is None


async def test_an_id_taken_on_disk_first_leaves_no_temporary_file(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create(id="race")
        write_log(tmp_path, "race", [])  # another process published it first
        with pytest.raises(SessionExistsError, match="already exists"):
            session.append("user/message", {"turn": 1, "message": Message.user("x").to_json()})
    assert [p.name for p in (tmp_path / "race").iterdir()] == [FILE_NAME]


async def test_a_torn_last_line_is_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = events_of(lambda s: turn(s, 1))
    path = write_log(tmp_path, "torn", events, tail=b'{"seq": 15, "type": "turn/st')
    good = len(path.read_bytes()) - len(b'{"seq": 15, "type": "turn/st')
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with caplog.at_level(logging.WARNING, "dsh.session-jsonl"):
            resumed = await sessions.resume("torn")
        assert [e.to_json() for e in resumed.events] == events
    assert f"{path}:17: dropped a torn last line" in caplog.text
    assert path.stat().st_size == good


async def test_unreadable_session_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dir" / FILE_NAME).mkdir(parents=True)
    write_log(tmp_path, "eio", events_of(lambda s: turn(s, 1)))
    real_read = os.read

    def failing_read(fd: int, size: int) -> bytes:
        if Path(f"/proc/self/fd/{fd}").resolve().name == FILE_NAME:
            raise OSError(5, "Input/output error")
        return real_read(fd, size)

    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(SessionReadError, match="cannot open session file"):
            await sessions.resume("dir")
        monkeypatch.setattr(os, "read", failing_read)
        with pytest.raises(SessionReadError, match="cannot read session file") as info:
            await sessions.resume("eio")
        monkeypatch.undo()
        assert info.value.code == "SESSION_READ"
        assert isinstance(info.value, OSError)
        assert len((await sessions.resume("eio")).events) == 15  # the lock was released


def test_good_ids_are_accepted() -> None:
    for good in ["a", "0", "A.b_c-1", "x" * 128, "1af196fd5b7f48e08ec8313bb233323a"]:
        assert check_session_id(good) == good
    with pytest.raises(SessionIdError):
        check_session_id(None)


async def test_a_relative_root_is_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = located_from_home(
        tmp_path, monkeypatch, JsonlSessions, key="root", default=".dsh/sessions", home="s"
    )
    async with at as (ctx, _):
        with pytest.raises(ConfigError, match="root"):
            await ctx.plugin(JsonlSessions, {"root": ""})
        with pytest.raises(ConfigError, match="nope"):
            await ctx.plugin(JsonlSessions, {"nope": 1})
