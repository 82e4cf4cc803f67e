"""What ``session-jsonl`` syncs and when, and how it survives I/O errors.

``os`` functions are patched to count or to fail once (ENOSPC, EIO), only for the
descriptors of session files (and directories), so the event loops are untouched.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from dsh import Context, DshError
from dsh_llm import Message
from dsh_session import Session, Sessions
from dsh_session_jsonl import FILE_NAME, JsonlSessions, SessionDataError, SessionWriteError
from tests.plugins.session_jsonl.jsonl_support import (
    event_record,
    file_records,
    jsonl_runtime,
    write_log,
)
from tests.plugins.session_store.store_support import append_user, chunk

pytestmark = pytest.mark.anyio


def seqs(path: Path) -> list[int]:
    return [record["seq"] for record in file_records(path)[1:]]


@asynccontextmanager
async def first_message_written(tmp_path: Path) -> AsyncIterator[tuple[Session, Path, int, Any]]:
    """A store on ``tmp_path`` holding a new session whose user message ``first`` is
    written: the session, its file, the file's size, and the backend."""
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        session = sessions.create()
        append_user(session, "first")
        path = tmp_path / session.id / FILE_NAME
        yield session, path, path.stat().st_size, plugin


def is_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


def is_dir(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode)


def fail_once(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    code: int = errno.ENOSPC,
    when: Callable[[int], bool] = is_file,
) -> list[int]:
    """Make ``os.<name>`` raise ``OSError(code)`` the first time ``when(fd)`` holds;
    returns the list the failing fd is put in."""
    real = getattr(os, name)
    failed: list[int] = []

    def fake(fd: int, *args: Any) -> Any:
        if not failed and when(fd):
            failed.append(fd)
            raise OSError(code, os.strerror(code))
        return real(fd, *args)

    monkeypatch.setattr(os, name, fake)
    return failed


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record ``"file"`` or ``"dir"`` for each fsync (and still sync)."""
    real = os.fsync
    calls: list[str] = []

    def fake(fd: int) -> None:
        calls.append("dir" if is_dir(fd) else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fake)
    return calls


# -- what is synced when -----------------------------------------------------------------


async def test_chunks_are_batched_and_each_commit_is_synced_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_fsyncs(monkeypatch)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create()
        path = tmp_path / session.id / FILE_NAME
        session.append("turn/start", {"turn": 1})
        assert calls == []
        append_user(session, "hi")  # creates the file: the file, its directory and the root
        assert calls == ["file", "dir", "dir"]
        assert seqs(path) == [0, 1]
        calls.clear()
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("request/header", {"turn": 1, "step": 1, "header": {"model": "m"}})
        for i in range(50):
            chunk(session, i)
        assert calls == []
        assert seqs(path) == [0, 1]  # not even written yet
        commits: list[tuple[str, dict[str, Any]]] = [
            ("assistant/message", {"turn": 1, "step": 1, "message": Message.user("x").to_json()}),
            ("tool/call", {"turn": 1, "step": 1, "call_id": "c", "name": "t", "arguments": ""}),
            (
                "tool/result",
                {
                    "turn": 1,
                    "step": 1,
                    "call_id": "c",
                    "name": "t",
                    "content": "",
                    "is_error": False,
                },
            ),
            ("step/end", {"turn": 1, "step": 1}),
            ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ]
        for n, (kind, data) in enumerate(commits, start=1):
            event = session.append(kind, data)
            assert calls == ["file"] * n
            assert seqs(path)[-1] == event.seq  # durable before append returned
        assert seqs(path) == list(range(len(session.events)))


async def test_an_existing_session_directory_is_reused_and_not_resynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create(id="left")
        (tmp_path / "left").mkdir(parents=True)  # a crash left it before publishing
        calls = count_fsyncs(monkeypatch)
        append_user(session, "hi")
        assert calls == ["file", "dir"]
        assert seqs(tmp_path / "left" / FILE_NAME) == [0]


async def test_without_fsync_nothing_is_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_fsyncs(monkeypatch)
    async with jsonl_runtime(tmp_path, fsync=False) as (_, sessions, _):
        session = sessions.create()
        session.append("turn/start", {"turn": 1})
        append_user(session, "a")
        chunk(session, 0)
        append_user(session, "b")
        assert seqs(tmp_path / session.id / FILE_NAME) == [0, 1, 2, 3]
    async with jsonl_runtime(tmp_path, fsync=False) as (_, sessions, _):
        resumed = await sessions.resume(session.id)  # repairs the open turn
        append_user(resumed, "c", turn=2)
    assert seqs(tmp_path / session.id / FILE_NAME) == [0, 1, 2, 3, 4, 5]
    assert calls == []


# -- failures ----------------------------------------------------------------------------


async def test_enospc_on_fsync_raises_cuts_back_and_a_retry_leaves_no_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with first_message_written(tmp_path) as (session, path, size, plugin):
        chunk(session, 0)
        fail_once(monkeypatch, "fsync")
        with pytest.raises(SessionWriteError) as info:
            append_user(session, "second")
        error = info.value
        assert isinstance(error, DshError)
        assert isinstance(error, OSError)
        assert error.code == "SESSION_WRITE"
        assert isinstance(error.__cause__, OSError)
        assert error.__cause__.errno == errno.ENOSPC
        assert f"cannot write session file {path}" in str(error)
        assert f"cut back to its last good length ({size} bytes)" in str(error)
        assert path.stat().st_size == size
        assert len(session.events) == 3  # the store keeps the event in memory
        log = plugin.log_of(session.id)
        assert log is not None
        assert log.pending == 2
        append_user(session, "third")  # the retry: the next commit writes all three
        assert seqs(path) == [0, 1, 2, 3]
        assert log.pending == 0
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        resumed = await sessions.resume(session.id)
        assert [m.text for m in resumed.derive_messages()] == ["first", "second", "third"]


async def test_a_short_write_then_eio_leaves_no_torn_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with first_message_written(tmp_path) as (session, path, size, _):
        real = os.write
        state = {"calls": 0}

        def short_then_fail(fd: int, data: Any) -> int:
            if not is_file(fd):
                return real(fd, data)
            state["calls"] += 1
            if state["calls"] == 1:
                return real(fd, data[: len(data) // 2])
            if state["calls"] == 2:
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real(fd, data)

        monkeypatch.setattr(os, "write", short_then_fail)
        with pytest.raises(SessionWriteError, match="Input/output error"):
            append_user(session, "second " * 20)
        assert path.stat().st_size == size
        append_user(session, "third")
        assert seqs(path) == [0, 1, 2]


async def test_a_failed_rollback_reports_both_errors_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with first_message_written(tmp_path) as (session, path, size, _):
        fail_once(monkeypatch, "fsync", errno.EIO)
        fail_once(monkeypatch, "ftruncate", errno.EROFS)
        with pytest.raises(SessionWriteError, match="failed too") as info:
            append_user(session, "second")
        group = info.value.__cause__
        assert isinstance(group, ExceptionGroup)
        assert [e.errno for e in group.exceptions if isinstance(e, OSError)] == [
            errno.EIO,
            errno.EROFS,
        ]
        assert path.stat().st_size > size  # the unsynced record is still there
        append_user(session, "third")  # cuts back first, then writes both again
        assert seqs(path) == [0, 1, 2]


async def test_a_failed_directory_sync_is_retried_by_the_next_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create()
        fail_once(monkeypatch, "fsync", errno.EIO, when=is_dir)
        with pytest.raises(SessionWriteError, match="cannot sync directory"):
            append_user(session, "first")
        path = tmp_path / session.id / FILE_NAME
        assert seqs(path) == [0]  # written and synced; only the entry may not be
        monkeypatch.undo()
        calls = count_fsyncs(monkeypatch)
        append_user(session, "second")
        assert calls == ["dir", "dir", "file"]
        assert seqs(path) == [0, 1]


async def test_a_failed_creation_leaves_nothing_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create()
        fail_once(monkeypatch, "fsync")
        with pytest.raises(SessionWriteError, match="cannot create session file"):
            append_user(session, "first")
        directory = tmp_path / session.id
        assert list(directory.iterdir()) == []  # the temporary file is gone
        append_user(session, "second")
        assert seqs(directory / FILE_NAME) == [0, 1]


async def test_a_root_that_cannot_be_created(tmp_path: Path) -> None:
    root = tmp_path / "file"
    async with jsonl_runtime(root) as (_, sessions, _):
        # A root that became a file after the plugin started (a file there before
        # fails the plugin: tests/plugins/session/test_store_checks.py).
        root.write_text("not a directory")
        session = sessions.create()
        with pytest.raises(SessionWriteError, match="cannot create session file"):
            append_user(session, "first")


async def test_write_errors_when_closing_are_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, "dsh.session-jsonl"):
        async with jsonl_runtime(tmp_path) as (_, sessions, _):
            session = sessions.create(id="closing")
            append_user(session, "first")
            chunk(session, 0)  # buffered when the runtime exits
            fail_once(monkeypatch, "write")
    assert "session 'closing': records lost when closing" in caplog.text
    assert seqs(tmp_path / "closing" / FILE_NAME) == [0]


async def test_a_header_that_is_not_json_vetoes_the_session(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(SessionDataError, match="its header carries data that is not JSON"):
            sessions.create(id="nan", meta={"temperature": float("nan")})
        assert sessions.get("nan") is None


# -- failures while loading --------------------------------------------------------------


@pytest.mark.parametrize("fsync", [True, False])
async def test_a_damaged_tail_is_cut_durably_and_the_closing_records_follow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool
) -> None:
    path = write_log(
        tmp_path,
        "torn",
        [event_record(0, "turn/start", {"turn": 1})],
        tail=b'{"seq": 1, "type": "us',
    )
    calls = count_fsyncs(monkeypatch)
    async with jsonl_runtime(tmp_path, fsync=fsync) as (ctx, sessions, _):
        await ctx.serial("session/open", "torn")  # loading cuts the tail, writes nothing
        assert seqs(path) == [0]
        assert calls == (["file"] if fsync else [])
        calls.clear()
        await sessions.resume("torn")
        # The store closes turn 1; the backend writes (and syncs) its turn/end.
        assert seqs(path) == [0, 1]
        assert calls == (["file"] if fsync else [])


async def test_a_failed_write_of_the_closing_records_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_log(tmp_path, "open", [event_record(0, "turn/start", {"turn": 1})])
    before = path.read_bytes()
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        fail_once(monkeypatch, "fsync")
        with pytest.raises(SessionWriteError, match="cannot write session file"):
            await sessions.resume("open")
        # The failed resume left the store again: letting its file go wrote the
        # buffered turn/end after the good prefix (the failed write was cut back).
        assert sessions.get("open") is None
        assert plugin.log_of("open") is None
        assert path.read_bytes().startswith(before)
    assert seqs(path) == [0, 1]
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        resumed = await sessions.resume("open")  # closed once: nothing to add
        assert [e.type for e in resumed.events] == ["turn/start", "turn/end"]
        assert resumed.turn_end(1) == {"kind": "interrupted"}
    assert seqs(path) == [0, 1]


async def test_a_failed_cut_of_a_damaged_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_log(
        tmp_path, "torn", [event_record(0, "turn/start", {"turn": 1})], tail=b'{"seq": 1'
    )
    before = path.read_bytes()
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        fail_once(monkeypatch, "ftruncate")
        with pytest.raises(SessionWriteError, match="cannot cut session file"):
            await sessions.resume("torn")
        assert path.read_bytes() == before


async def test_a_failed_cut_when_attaching_fails_the_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        session = ctx.sessions.create(id="live")
        session.append("turn/start", {"turn": 1})
        header = json.dumps(
            {"type": "session", "version": 1, "id": "live", "created_at": session.header.created_at}
        )
        path = tmp_path / "live" / FILE_NAME
        path.parent.mkdir()
        path.write_bytes(header.encode() + b"\n{torn")
        fail_once(monkeypatch, "ftruncate")
        with pytest.raises(SessionWriteError, match="cannot cut session file"):
            await ctx.plugin(JsonlSessions, {"root": str(tmp_path)})
        monkeypatch.undo()
        await ctx.plugin(JsonlSessions, {"root": str(tmp_path)})  # the file was unlocked
        assert seqs(path) == []  # cut; turn/start is buffered
    assert seqs(path) == [0]
