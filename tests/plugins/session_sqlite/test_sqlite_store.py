"""``session-sqlite`` beyond the store contract (which runs against every store:
``tests/plugins/session_store``): the file, its transactions and locks, damaged,
foreign and locked databases, write failures, readers beside a writer."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh import ConfigError, Context
from dsh_session import (
    DURABLE_EVENTS,
    SessionCorruptError,
    SessionEvent,
    SessionInUseError,
    SessionReadError,
    Sessions,
    SessionWriteError,
)
from dsh_session_sqlite import (
    SCHEMA_VERSION,
    SessionDatabaseError,
    SessionLock,
    SqliteSessions,
    list_sessions,
    load_session,
    locks_of,
    read_session,
)
from tests.plugins.session_store.store_support import (
    Broken,
    SqliteStore,
    append_user,
    chunk,
    entries,
    events_of,
    located_from_home,
    turn,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "store")


@contextlib.contextmanager
def write_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holding the database's write lock."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    finally:
        connection.execute("ROLLBACK")
        connection.close()


def plugin_connection(plugin: SqliteSessions) -> sqlite3.Connection:
    connection = plugin._db.open(create=False)
    assert connection is not None
    return connection


# -- the file ----------------------------------------------------------------------------


async def test_the_database_file(store: SqliteStore) -> None:
    async with store.runtime() as (_, sessions, plugin):
        assert plugin.path == store.path
        session = sessions.create()
        assert not store.path.parent.exists()  # created by the first write
        append_user(session, "hi")
        connection = plugin_connection(plugin)
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert entries(store.path.parent) == [
            "sessions.db",
            "sessions.db-locks",
            "sessions.db-shm",
            "sessions.db-wal",
        ]
        # The live session holds its lock file (beside the set-up lock, which stays).
        assert entries(locks_of(store.path)) == [".setup", session.id]
        log = plugin.log_of(session.id)
        assert log is not None
        assert (log.stored, log.pending) == (1, 0)
        assert repr(log).startswith(f"<SqliteLog {session.id!r}")
    assert store.path.stat().st_mode & 0o777 == 0o600
    assert store.path.parent.stat().st_mode & 0o777 == 0o700
    assert locks_of(store.path).stat().st_mode & 0o777 == 0o700
    assert entries(locks_of(store.path)) == [".setup"]  # let go: the lock file is removed
    assert "sessions.db-wal" not in entries(store.path.parent)  # checkpointed on close


async def test_without_fsync_commits_are_not_synced(store: SqliteStore) -> None:
    async with store.runtime(fsync=False) as (_, sessions, plugin):
        append_user(sessions.create(), "hi")
        assert plugin_connection(plugin).execute("PRAGMA synchronous").fetchone() == (1,)


async def test_chunks_are_batched_and_each_commit_is_one_transaction(store: SqliteStore) -> None:
    async with store.runtime() as (_, sessions, plugin):
        session = sessions.create()
        append_user(session, "first")  # creates the database
        statements: list[str] = []
        plugin_connection(plugin).set_trace_callback(statements.append)
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        for i in range(50):
            chunk(session, i)
        assert statements == []  # nothing written yet
        assert len(store.records(session.id)) == 1
        session.append("step/end", {"turn": 1, "step": 1})  # durable: one transaction
        kinds = [s.split()[0].upper() for s in statements]
        assert kinds == ["BEGIN", *["INSERT"] * 53, "COMMIT"]
        assert len(store.records(session.id)) == 54
        statements.clear()
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert [s.split()[0].upper() for s in statements] == ["BEGIN", "INSERT", "COMMIT"]


async def test_a_relative_path_is_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home_db = tmp_path / "home" / "s.db"
    at = located_from_home(
        tmp_path, monkeypatch, SqliteSessions, key="path", default=".dsh/sessions.db", home="s.db"
    )
    async with at as (ctx, home):
        assert repr(home.instance) == f"<SqliteSessions {home_db} (0 live)>"
        for bad, key in [({"path": ""}, "path"), ({"busy_timeout_ms": -1}, "busy_timeout_ms")]:
            with pytest.raises(ConfigError, match=key):
                await ctx.plugin(SqliteSessions, bad)
        with pytest.raises(ConfigError, match="nope"):
            await ctx.plugin(SqliteSessions, {"nope": 1})
    assert entries(tmp_path) == []  # starting the plugin made nothing


# -- damaged, foreign and locked databases -------------------------------------------------


def damaged_database(store: SqliteStore) -> None:
    """A database whose pages past the header are overwritten."""
    store.store("s", events_of(lambda s: turn(s, 1)))
    size = store.path.stat().st_size
    with store.path.open("r+b") as file:
        file.seek(100)
        file.write(b"\xff" * (size - 100))


def foreign_database(store: SqliteStore) -> None:
    store.path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(store.path)) as connection:
        connection.execute("CREATE TABLE notes (text)")
        connection.commit()


def newer_database(store: SqliteStore) -> None:
    store.store("s", [])
    with contextlib.closing(sqlite3.connect(store.path)) as connection:
        connection.execute("PRAGMA user_version = 7")


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda s: s.path.parent.mkdir() or s.path.write_bytes(b"x" * 4096), "not a database"),
        (damaged_database, "malformed"),
        (foreign_database, "(user_version 0; tables: notes)"),
        (newer_database, "(user_version 7; tables: events, sessions)"),
    ],
    # A path that is a directory fails as a config error naming the key, before it
    # is opened: tests/plugins/session/test_store_checks.py.
    ids=["garbage", "damaged", "foreign", "newer"],
)
async def test_an_unusable_database_fails_the_plugin_naming_the_file(
    store: SqliteStore, make: Any, problem: str
) -> None:
    make(store)
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        with pytest.raises(SessionDatabaseError) as info:
            await store.start(ctx)
    error = info.value
    assert str(store.path) in str(error)
    assert problem in str(error)
    assert (error.code, error.path) == ("SESSION_DATABASE", str(store.path))
    assert isinstance(error, SessionReadError)


async def test_a_locked_database_fails_the_plugin_naming_the_file(store: SqliteStore) -> None:
    store.store("s", [])
    with write_lock(store.path):
        async with Context() as ctx:
            await ctx.plugin(Sessions)
            with pytest.raises(SessionDatabaseError, match="is locked by another connection"):
                await store.start(ctx, busy_timeout_ms=0)
    async with store.runtime(busy_timeout_ms=0) as (_, sessions, _):  # free again
        assert (await sessions.resume("s")).events == []


async def test_a_database_that_cannot_be_created(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "file")
    async with store.runtime() as (_, sessions, _):
        # Its folder's place taken by a file after the plugin started (a file there
        # before fails the plugin: tests/plugins/session/test_store_checks.py).
        store.path.parent.write_text("not a directory")
        session = sessions.create()
        with pytest.raises(SessionWriteError, match="cannot create session database") as info:
            append_user(session, "first")
        assert isinstance(info.value.__cause__, SessionDatabaseError)


async def test_a_database_its_creator_has_not_given_a_schema_yet_lists_nothing(
    store: SqliteStore,
) -> None:
    store.path.parent.mkdir()
    store.path.write_bytes(b"")  # created, the schema not yet written: a reader races it
    assert list_sessions(store.path) == []
    assert read_session(store.path, "s") is None


async def test_listing_or_reading_an_unusable_database(store: SqliteStore) -> None:
    store.path.parent.mkdir()
    store.path.write_bytes(b"x" * 4096)
    for read in (list_sessions, lambda path: read_session(path, "s")):
        with pytest.raises(SessionDatabaseError, match="cannot open session database") as info:
            read(store.path)
        assert "file is not a database" in str(info.value)
    store.path.unlink()
    foreign_database(store)
    with pytest.raises(SessionDatabaseError, match="cannot list the sessions of database"):
        list_sessions(store.path)
    with pytest.raises(SessionReadError, match=f'cannot read session "s" from {store.path}'):
        read_session(store.path, "s")


async def test_a_database_damaged_after_the_start_fails_loads_and_checks(
    store: SqliteStore,
) -> None:
    store.store("s", events_of(lambda s: turn(s, 1)))
    async with store.runtime() as (_, sessions, _):
        store.path.write_bytes(b"x" * 4096)
        with pytest.raises(SessionDatabaseError, match="file is not a database") as info:
            await sessions.resume("s")
        assert info.value.path == str(store.path)
        with pytest.raises(SessionReadError, match="cannot read session database"):
            sessions.create(id="t")
        assert sessions.get("t") is None


async def test_a_session_row_with_a_bad_header_refuses_the_load(store: SqliteStore) -> None:
    store.insert_session("bad", created=1.0, cwd=None, meta="[]")
    store.insert_session("when", created="yesterday", cwd=None)  # type: ignore[arg-type]
    async with store.runtime() as (_, sessions, _):
        with pytest.raises(SessionCorruptError, match="meta is not a JSON object") as info:
            await sessions.resume("bad")
        assert str(info.value).startswith(f"{store.path}: session 'bad': ")
        assert info.value.line == -1
        with pytest.raises(SessionCorruptError, match="created_at or cwd is malformed"):
            await sessions.resume("when")


# -- writing fails -----------------------------------------------------------------------


async def test_a_commit_that_stays_locked_is_rolled_back_and_retried(store: SqliteStore) -> None:
    async with store.runtime(busy_timeout_ms=0) as (_, sessions, plugin):
        session = sessions.create()
        append_user(session, "first")
        chunk(session, 0)
        with (
            write_lock(store.path),
            pytest.raises(SessionWriteError, match="database is locked") as info,
        ):
            append_user(session, "second")
        error = info.value
        assert error.code == "SESSION_WRITE"
        assert f'cannot write session "{session.id}" to {store.path}' in str(error)
        assert "the next commit writes the 2 buffered record(s) again" in str(error)
        assert isinstance(error.__cause__, sqlite3.OperationalError)
        log = plugin.log_of(session.id)
        assert log is not None
        assert (log.stored, log.pending) == (1, 2)
        append_user(session, "third")  # the retry: one transaction writes all three
        assert [r["seq"] for r in store.records(session.id)] == [0, 1, 2, 3]
        assert (log.stored, log.pending) == (4, 0)
    async with store.runtime() as (_, sessions, _):
        resumed = await sessions.resume(session.id)
        assert [m.text for m in resumed.derive_messages()] == ["first", "second", "third"]


async def test_a_full_disk_is_rolled_back_and_retried(store: SqliteStore) -> None:
    async with store.runtime() as (_, sessions, plugin):
        session = sessions.create()
        append_user(session, "first")
        connection = plugin_connection(plugin)
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(SessionWriteError, match="full"):
            append_user(session, "x" * 100_000)
        assert len(store.records(session.id)) == 1
        connection.execute("PRAGMA max_page_count = 1000000")
        append_user(session, "third")
        assert [r["seq"] for r in store.records(session.id)] == [0, 1, 2]


async def test_flush_reports_the_records_a_locked_database_keeps_out(store: SqliteStore) -> None:
    store.store("other", [])  # the database exists
    async with store.runtime(busy_timeout_ms=0) as (_, sessions, _):
        session = sessions.create(id="new")
        append_user(session, "first")
        session.append("turn/start", {"turn": 1})
        with write_lock(store.path):
            (unsaved,) = sessions.flush(session)
        assert (unsaved.session_id, unsaved.records) == ("new", 1)
        assert isinstance(unsaved.error, SessionWriteError)
        assert str(unsaved).startswith(
            '1 record of session new could not be stored: cannot write session "new"'
        )
        assert sessions.flush(session) == []  # free again: written now
        assert [r["seq"] for r in store.records("new")] == [0, 1]


async def test_a_first_write_that_fails_keeps_the_lock_for_the_retry(store: SqliteStore) -> None:
    store.store("other", [])  # the database exists
    async with store.runtime(busy_timeout_ms=0) as (_, sessions, _):
        session = sessions.create(id="new")
        with write_lock(store.path), pytest.raises(SessionWriteError):
            append_user(session, "first")
        assert entries(locks_of(store.path)) == [".setup", "new"]
        append_user(session, "second")
        assert [r["seq"] for r in store.records("new")] == [0, 1]


async def test_write_errors_when_closing_are_logged(
    store: SqliteStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, "dsh.session-sqlite"):
        async with store.runtime(busy_timeout_ms=0) as (_, sessions, _):
            session = sessions.create(id="closing")
            append_user(session, "first")
            chunk(session, 0)  # buffered when the runtime exits
            held = write_lock(store.path)
            held.__enter__()
        held.__exit__(None, None, None)
    assert "session 'closing': records lost when closing" in caplog.text
    assert [r["seq"] for r in store.records("closing")] == [0]
    assert entries(locks_of(store.path)) == [".setup"]  # the lock was let go all the same


async def test_a_failed_cut_of_a_damaged_tail(store: SqliteStore) -> None:
    events = events_of(lambda s: turn(s, 1, close=False))
    store.store("tail", [*events, dict(events[0], seq=len(events), data={})])
    before = store.raw("tail")
    async with store.runtime(busy_timeout_ms=0) as (_, sessions, _):
        with write_lock(store.path), pytest.raises(SessionWriteError, match="cannot cut session"):
            await sessions.resume("tail")
        assert store.raw("tail") == before
        resumed = await sessions.resume("tail")  # the lock was let go
        assert resumed.turn_end(1) == {"kind": "interrupted"}


# -- locks -------------------------------------------------------------------------------


async def test_a_second_writer_in_another_process_is_refused(store: SqliteStore) -> None:
    script = (
        "import sys, anyio\n"
        "from dsh import Context\n"
        "from dsh_session import Sessions\n"
        "from dsh_session_sqlite import SqliteSessions\n"
        "async def main():\n"
        "    async with Context() as ctx:\n"
        "        await ctx.plugin(Sessions)\n"
        "        await ctx.plugin(SqliteSessions, {'path': sys.argv[1]})\n"
        "        try:\n"
        "            await ctx.sessions.resume('live')\n"
        "        except Exception as exc:\n"
        "            print(exc.code, exc)\n"
        "anyio.run(main)\n"
    )
    async with store.runtime() as (_, sessions, _):
        live = sessions.create(id="live")
        turn(live, 1)
        done = await anyio.run_process([sys.executable, "-c", script, str(store.path)])
        assert done.stdout.decode().startswith(
            'SESSION_IN_USE session "live" is in use by a live session'
        )
        turn(live, 2)  # the refused process wrote nothing in between
    assert [r["seq"] for r in store.records("live")] == list(range(30))


async def test_a_lock_left_by_a_dead_holder_is_taken_over(store: SqliteStore) -> None:
    store.store("s", events_of(lambda s: turn(s, 1)))
    left = locks_of(store.path) / "s"
    left.write_text("")  # a holder that died: nobody holds it (the folder: set-up's)
    async with store.runtime() as (_, sessions, _):
        assert len((await sessions.resume("s")).events) == 15
        assert entries(left.parent) == [".setup", "s"]
    assert entries(left.parent) == [".setup"]


def test_a_lock_file_removed_or_replaced_while_locking_is_taken_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = fcntl.flock
    steps = iter(["remove", "replace"])

    def racing(fd: int, operation: int) -> None:
        step = next(steps, None)
        path = tmp_path / "s"
        if step is not None:  # the previous holder lets go just before we lock
            path.unlink()
            if step == "replace":
                path.write_text("")
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", racing)
    lock = SessionLock.take(tmp_path, "s")
    assert os.stat(lock.path).st_ino == os.fstat(lock._fd).st_ino  # type: ignore[arg-type]
    assert "held" in repr(lock)
    lock.release()
    lock.release()
    assert not lock.held
    assert "released" in repr(lock)


def test_a_lock_that_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "locks").write_text("a file")
    with pytest.raises(SessionWriteError, match="cannot make the lock file"):
        SessionLock.take(tmp_path / "locks", "s")
    held = SessionLock.take(tmp_path, "t")
    with pytest.raises(SessionInUseError):
        SessionLock.take(tmp_path, "t")
    held.release()


async def test_loading_a_live_session_from_outside_is_refused(store: SqliteStore) -> None:
    async with store.runtime() as (_, sessions, _):
        turn(sessions.create(id="live"), 1)
        with pytest.raises(SessionInUseError, match="in use by a live session"):
            load_session(store.path, "live")
        # A snapshot takes no lock: it reads the live session as committed.
        snapshot = read_session(store.path, "live")
        assert snapshot is not None
        assert len(snapshot[1]) == 15
    assert load_session(store.path.with_name("missing.db"), "live") is None
    assert read_session(store.path.with_name("missing.db"), "live") is None
    assert read_session(store.path, "unknown") is None


# -- reading beside a writer ----------------------------------------------------------------


async def test_readers_do_not_wait_for_a_writer_and_see_only_commits(
    store: SqliteStore,
) -> None:
    async with store.runtime() as (_, sessions, _):
        session = sessions.create(id="busy")
        turn(session, 1)
        with write_lock(store.path) as other:
            # Another writer's transaction is open (the lock is busy): readers go on,
            # and see only what was committed.
            other.execute("INSERT INTO events VALUES (1, 99, 'turn/start', 1.0, '{\"turn\": 9}')")
            snapshot = await anyio.to_thread.run_sync(read_session, store.path, "busy")
            listing = await anyio.to_thread.run_sync(list_sessions, store.path)
        assert snapshot is not None
        assert len(snapshot[1]) == 15
        assert [(s.id, s.events) for s in listing] == [("busy", 15)]


class Progress:
    """How many snapshots each reader thread took; the writer waits for them."""

    def __init__(self, readers: int) -> None:
        self.counts = [0] * readers
        self.changed = anyio.Event()

    def bump(self, reader: int) -> None:  # runs in the event loop's thread
        self.counts[reader] += 1
        self.changed.set()

    async def read_again(self) -> None:
        """Until every reader finished a snapshot it began after this call."""
        targets = [count + 2 for count in self.counts]
        while any(count < target for count, target in zip(self.counts, targets, strict=True)):
            self.changed = anyio.Event()
            await self.changed.wait()


async def test_concurrent_readers_while_a_writer_appends(store: SqliteStore) -> None:
    readers, turns = 3, 12
    progress = Progress(readers)
    stop = threading.Event()
    snapshots: list[list[Sequence[SessionEvent]]] = [[] for _ in range(readers)]
    listed: list[int] = []

    def read(reader: int) -> None:
        while not stop.is_set():
            got = read_session(store.path, "busy")
            snapshots[reader].append([] if got is None else got[1])
            listed.extend(s.events for s in list_sessions(store.path) if s.id == "busy")
            anyio.from_thread.run_sync(progress.bump, reader)

    async with store.runtime() as (_, sessions, _):
        session = sessions.create(id="busy")
        append_user(session, "start")
        async with anyio.create_task_group() as tg:
            for reader in range(readers):
                tg.start_soon(anyio.to_thread.run_sync, read, reader)
            for n in range(1, turns + 1):
                turn(session, n)
                await progress.read_again()
            stop.set()
        final = [e.to_json() for e in session.events]
    boundaries = {i + 1 for i, e in enumerate(final) if e["type"] in DURABLE_EVENTS}
    for mine in snapshots:
        assert mine
        lengths = [len(events) for events in mine]
        assert lengths == sorted(lengths)  # never backwards
        for events in mine:
            # A prefix of the log that ends at a commit: never half a batch.
            assert [e.to_json() for e in events] == final[: len(events)]
            assert len(events) in boundaries
    assert set(listed) <= boundaries
    # Each reader saw the whole log in the end.
    assert all(len(mine[-1]) == len(final) for mine in snapshots)


# -- listing -----------------------------------------------------------------------------


async def test_listing_reports_rows_that_are_not_sessions(store: SqliteStore) -> None:
    store.insert_session("not/an/id")
    store.store("ok", [])
    records = events_of(lambda s: turn(s, 1))
    store.store("tail", [*records, {"seq": 15, "type": "x/y", "time": 9.0, "data": {}}])
    summaries = {s.id: s for s in list_sessions(store.path)}
    assert summaries["not/an/id"].error == f"{store.path}: invalid session id 'not/an/id'"
    assert summaries["ok"].error is None
    # A record no plugin declares is history (counted, its time the last activity);
    # the turns come from the last record of a built-in type.
    tail = summaries["tail"]
    assert (tail.events, tail.turns, tail.last_activity, tail.open) == (16, 1, 9.0, False)
    # A record that is not an event is skipped.
    store.store("torn", [*records, Broken(15)])
    torn = next(s for s in list_sessions(store.path) if s.id == "torn")
    assert (torn.events, torn.turns, torn.open) == (15, 1, False)


def test_dsh_sessions_lists_and_resumes_from_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh import cli
    from tests.support import first_stored_session, stored_echo_deployment

    store = "- {id: store, name: session-sqlite, config: {path: stored.db}}\n"
    path = stored_echo_deployment(tmp_path, monkeypatch, store=store)
    line = first_stored_session(path, capsys)
    session_id = line.split()[0]
    assert "  1 turn  tokens 11 in / 6 out  agent main  model echo-mock" in line
    assert line.endswith('  "echo one"\n')
    assert cli.main(["run", str(path), "--resume", session_id, "-p", "echo two"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: two\n"
    assert cli.main(["sessions", str(path)]) == 0
    assert "  2 turns  tokens 26 in / 12 out  agent main" in capsys.readouterr().out


# -- leases ------------------------------------------------------------------------------


async def test_the_first_lease_adds_the_leases_table_and_keeps_the_schema_version(
    store: SqliteStore,
) -> None:
    store.store("old", list(events_of(lambda s: turn(s, 1))))  # written before leases
    async with store.runtime() as (_, sessions, _):
        lease = await sessions.lease("old")
        assert (lease.epoch, lease.stored) == (1, True)
    connection = store.connect()
    try:
        assert connection.execute("SELECT id, epoch FROM leases").fetchall() == [("old", 1)]
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        connection.close()


async def test_a_lease_in_a_database_with_a_foreign_leases_table_fails(
    store: SqliteStore,
) -> None:
    connection = store.connect()
    connection.execute("CREATE TABLE leases (id TEXT, epoch INTEGER)")
    connection.close()
    async with store.runtime() as (_, sessions, _):
        with pytest.raises(SessionWriteError, match='cannot take the lease of session "s"'):
            await sessions.lease("s")


async def test_a_database_file_not_yet_given_its_schema_holds_no_session(
    store: SqliteStore,
) -> None:
    # What another process sees between making the file and committing the schema.
    store.path.parent.mkdir()
    store.path.touch()
    assert read_session(store.path, "s") is None
    assert load_session(store.path, "s") is None
