"""The session stores under one interface, so the store contract is one test suite
run against each backend (``session-jsonl``, ``session-sqlite``).

A :class:`Store` starts its backend on a place under a test's ``tmp_path`` and reads and
writes what it stores by hand (as another process, a crash or bit rot would), in the
neutral form of records: ``{"seq", "type", "time", "data"}`` dicts, or
:class:`Broken` for a record whose data cannot be decoded.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from dsh import Context, Fiber
from dsh_llm import Message, TextBlock, ToolCallBlock
from dsh_session import (
    CHUNKS_ROW,
    ChunkRun,
    Session,
    SessionEvent,
    SessionHeader,
    Sessions,
    SessionSummary,
)
from dsh_session_jsonl import FILE_NAME, JsonlSessions
from dsh_session_jsonl import list_sessions as jsonl_list
from dsh_session_jsonl._format import READ_VERSIONS
from dsh_session_sqlite import SqliteSessions
from dsh_session_sqlite import list_sessions as sqlite_list
from dsh_session_sqlite._db import prepare

Record = dict[str, Any]
Runtime = tuple[Context, Sessions, Any]

#: The store's crash repair results (``dsh_session._session``).
UNKNOWN_OUTCOME = (
    "Error: the session was interrupted while this tool call ran; its outcome is unknown"
)
NOT_STARTED = "Error: the session was interrupted before this tool call started"


@dataclass(frozen=True)
class Broken:
    """A stored record whose data is cut short (not JSON), at ``seq``."""

    seq: int
    type: str = "assistant/chunk"


class Store(ABC):
    """One backend, storing under ``base`` (a test's ``tmp_path`` or below)."""

    #: The id of the parametrized tests.
    name: ClassVar[str]
    #: The YAML name of the backend.
    yaml_name: ClassVar[str]
    #: The plugin class.
    plugin: ClassVar[type[Any]]
    #: The logger of its warnings.
    logger: ClassVar[str]
    #: What a listing reports for the entry :meth:`store_unreadable` made.
    unreadable: ClassVar[str]
    #: Whether the backend stores the chunks of a step packed (``assistant/chunks``).
    packs: ClassVar[bool]

    def __init__(self, base: Path) -> None:
        self.base = base

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """The backend's config storing under :attr:`base`."""

    def yaml_entry(self, entry_id: str = "persistence") -> str:
        """A deployment entry of the backend with :meth:`config`."""
        return f"- {{id: {entry_id}, name: {self.yaml_name}, config: {json.dumps(self.config())}}}"

    async def start(self, ctx: Context, **extra: Any) -> Fiber:
        """Start the backend in ``ctx`` (which runs the ``sessions`` store)."""
        return await ctx.plugin(self.plugin, {**self.config(), **extra})

    @asynccontextmanager
    async def runtime(self, **extra: Any) -> AsyncIterator[Runtime]:
        """A root with the store and this backend."""
        async with Context() as ctx:
            await ctx.plugin(Sessions)
            fiber = await self.start(ctx, **extra)
            yield ctx, ctx.sessions, fiber.instance

    @abstractmethod
    def location(self, session_id: str) -> str:
        """Where session ``session_id`` is stored (``SessionCorruptError.path``)."""

    @abstractmethod
    def where(self, session_id: str, index: int, seq: int | None = None) -> str:
        """How an error locates the event record at ``index`` of the session (whose
        seq is ``seq``, when it is not ``index``)."""

    @abstractmethod
    def label(self, index: int) -> str:
        """How a message names the event record at ``index`` of a session."""

    @abstractmethod
    def line(self, index: int) -> int:
        """``SessionCorruptError.line`` for the event record at ``index``."""

    @abstractmethod
    def raw(self, session_id: str) -> object:
        """What is stored for ``session_id``, as stored (to compare before and after)."""

    @abstractmethod
    def store(
        self, session_id: str, records: Sequence[Record | Broken], created: float = 1.0
    ) -> None:
        """Store session ``session_id`` by hand: its header, then ``records``."""

    @abstractmethod
    def records(self, session_id: str) -> list[Record]:
        """The event records stored for ``session_id`` (as JSON values), one per event:
        a packed row of chunks gives one record per chunk."""

    def rows(self, session_id: str) -> list[Record]:
        """The records stored for ``session_id`` as stored (packed rows kept)."""
        return self.records(session_id)

    @abstractmethod
    def header(self, session_id: str) -> Record:
        """The stored header of ``session_id`` (``SessionHeader.to_json()``)."""

    @abstractmethod
    def exists(self, session_id: str) -> bool:
        """Whether anything of session ``session_id`` is stored."""

    @abstractmethod
    def append_raw(self, session_id: str, record: Record) -> None:
        """Another process appends ``record`` to a stored session."""

    @abstractmethod
    def remove(self, session_id: str) -> None:
        """Another process removes a stored session."""

    @abstractmethod
    def store_unreadable(self, session_id: str) -> None:
        """Store a session whose header cannot be read."""

    @abstractmethod
    def summaries(self) -> list[SessionSummary]:
        """The backend's module-level listing of :attr:`base`."""

    def stored(self) -> bool:
        """Whether the backend stored anything at all."""
        return any(self.base.iterdir()) if self.base.exists() else False


class JsonlStore(Store):
    name = "jsonl"
    yaml_name = "session-jsonl"
    plugin = JsonlSessions
    logger = "dsh.session-jsonl"
    unreadable = "line 1 is not a session header"
    packs = True

    def config(self) -> dict[str, Any]:
        return {"root": str(self.base)}

    def location(self, session_id: str) -> str:
        return str(self.base / session_id / FILE_NAME)

    def where(self, session_id: str, index: int, seq: int | None = None) -> str:
        return f"{self.location(session_id)}:{index + 2}"

    def label(self, index: int) -> str:
        return f"line {index + 2}"

    def line(self, index: int) -> int:
        return index + 2

    def raw(self, session_id: str) -> object:
        return Path(self.location(session_id)).read_bytes()

    def _lines(self, records: Sequence[Record | Broken]) -> bytes:
        out = []
        for record in records:
            if isinstance(record, Broken):
                out.append(f'{{"seq": {record.seq}, "type": "{record.type}", "da'.encode())
            else:
                out.append(json.dumps(record).encode())
        return b"".join(line + b"\n" for line in out)

    def store(
        self, session_id: str, records: Sequence[Record | Broken], created: float = 1.0
    ) -> None:
        path = Path(self.location(session_id))
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"type": "session", "version": 1, "id": session_id, "created_at": created}
        path.write_bytes(self._lines([header, *records]))

    def _all(self, session_id: str) -> list[Record]:
        raw = Path(self.location(session_id)).read_bytes()
        return [json.loads(line) for line in raw.splitlines()]

    def rows(self, session_id: str) -> list[Record]:
        return self._all(session_id)[1:]

    def records(self, session_id: str) -> list[Record]:
        out: list[Record] = []
        for row in self.rows(session_id):
            if row["type"] == CHUNKS_ROW:
                run = ChunkRun.from_json(row["seq"], row["time"], row["data"])
                out.extend(json.loads(json.dumps(event.to_json())) for event in run)
            else:
                out.append(row)
        return out

    def header(self, session_id: str) -> Record:
        header = self._all(session_id)[0]
        assert header.pop("type") == "session"
        assert header.pop("version") in READ_VERSIONS
        return header

    def exists(self, session_id: str) -> bool:
        return (self.base / session_id).exists()

    def append_raw(self, session_id: str, record: Record) -> None:
        with Path(self.location(session_id)).open("ab") as file:
            file.write(self._lines([record]))

    def remove(self, session_id: str) -> None:
        Path(self.location(session_id)).unlink()

    def store_unreadable(self, session_id: str) -> None:
        path = Path(self.location(session_id))
        path.parent.mkdir(parents=True)
        path.write_text('{"type": "nope"}\n')

    def summaries(self) -> list[SessionSummary]:
        return jsonl_list(self.base)


class SqliteStore(Store):
    name = "sqlite"
    yaml_name = "session-sqlite"
    plugin = SqliteSessions
    logger = "dsh.session-sqlite"
    unreadable = "the session's meta is not a JSON object"
    packs = False

    @property
    def path(self) -> Path:
        return self.base / "sessions.db"

    def config(self) -> dict[str, Any]:
        return {"path": str(self.path)}

    def location(self, session_id: str) -> str:
        return str(self.path)

    def where(self, session_id: str, index: int, seq: int | None = None) -> str:
        return f"{self.path}: session {session_id!r}, seq {index if seq is None else seq}"

    def label(self, index: int) -> str:
        return f"seq {index}"

    def line(self, index: int) -> int:
        return index

    def raw(self, session_id: str) -> object:
        return self._events(session_id)

    def _events(self, session_id: str) -> list[tuple[int, str, float, str]]:
        """The event rows of ``session_id``: (seq, type, time, data as JSON text)."""
        connection = self.connect()
        try:
            rows: list[tuple[int, str, float, str]] = connection.execute(
                "SELECT seq, type, time, data FROM events JOIN sessions ON session = key "
                "WHERE id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
        finally:
            connection.close()
        return rows

    def connect(self) -> sqlite3.Connection:
        """A connection of the test's own, creating the database (and its schema)."""
        connection = prepare(self.path, fsync=False, busy_ms=5000, create=True)
        assert connection is not None
        return connection

    def _key(self, connection: sqlite3.Connection, session_id: str) -> int:
        row = connection.execute("SELECT key FROM sessions WHERE id = ?", (session_id,))
        key: int = row.fetchone()[0]
        return key

    def _insert(self, connection: sqlite3.Connection, key: int, record: Record | Broken) -> None:
        if isinstance(record, Broken):
            row = (key, record.seq, record.type, 1.0, '{"da')
        else:
            row = (key, record["seq"], record["type"], record["time"], json.dumps(record["data"]))
        connection.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", row)

    def insert_session(
        self, session_id: str, created: float = 1.0, cwd: str | None = None, meta: str = "{}"
    ) -> int:
        """Insert a session row by hand; returns its key."""
        with self.connect() as connection:
            connection.execute(
                "INSERT INTO sessions (id, created_at, cwd, meta) VALUES (?, ?, ?, ?)",
                (session_id, created, cwd, meta),
            )
            key = self._key(connection, session_id)
        connection.close()
        return key

    def store(
        self, session_id: str, records: Sequence[Record | Broken], created: float = 1.0
    ) -> None:
        key = self.insert_session(session_id, created)
        connection = self.connect()
        try:
            connection.execute("BEGIN")
            for record in records:
                self._insert(connection, key, record)
            connection.execute("COMMIT")
        finally:
            connection.close()

    def records(self, session_id: str) -> list[Record]:
        rows = self._events(session_id)
        return [{"seq": s, "type": t, "time": w, "data": json.loads(d)} for s, t, w, d in rows]

    def header(self, session_id: str) -> Record:
        connection = self.connect()
        try:
            row = connection.execute(
                "SELECT id, created_at, cwd, meta FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        finally:
            connection.close()
        header = SessionHeader(row[0], row[1], row[2], json.loads(row[3]))
        return header.to_json()

    def exists(self, session_id: str) -> bool:
        if not self.path.exists():
            return False
        connection = self.connect()
        try:
            row = connection.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,))
            return row.fetchone() is not None
        finally:
            connection.close()

    def append_raw(self, session_id: str, record: Record) -> None:
        connection = self.connect()
        try:
            self._insert(connection, self._key(connection, session_id), record)
        finally:
            connection.close()

    def remove(self, session_id: str) -> None:
        connection = self.connect()
        try:
            connection.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        finally:
            connection.close()

    def store_unreadable(self, session_id: str) -> None:
        self.insert_session(session_id, meta="nope")

    def summaries(self) -> list[SessionSummary]:
        return sqlite_list(self.path)


STORES: dict[str, Callable[[Path], Store]] = {"jsonl": JsonlStore, "sqlite": SqliteStore}


# -- building logs -------------------------------------------------------------------------


def turn(session: Session, n: int, *, close: bool = True) -> None:
    """A realistic turn: a tool call step with streamed chunks, then an answer."""
    session.append("turn/start", {"turn": n})
    session.append("user/message", {"turn": n, "message": Message.user(f"echo {n}").to_json()})
    session.append("step/start", {"turn": n, "step": 1})
    session.append("request/header", {"turn": n, "step": 1, "header": {"model": "m"}})
    for i in range(3):
        session.append("assistant/chunk", {"turn": n, "step": 1, "chunk": {"i": i}})
    call = ToolCallBlock(f"call-{n}", "echo", '{"text": "x"}')
    message = Message("assistant", (TextBlock("calling"), call))
    session.append("assistant/message", {"turn": n, "step": 1, "message": message.to_json()})
    session.append(
        "tool/call",
        {"turn": n, "step": 1, "call_id": call.id, "name": "echo", "arguments": call.arguments},
    )
    session.append(
        "tool/result",
        {
            "turn": n,
            "step": 1,
            "call_id": call.id,
            "name": "echo",
            "content": "x",
            "is_error": False,
        },
    )
    session.append("step/end", {"turn": n, "step": 1})
    if close:
        answer = Message("assistant", (TextBlock(f"done {n}"),))
        session.append("step/start", {"turn": n, "step": 2})
        session.append("assistant/message", {"turn": n, "step": 2, "message": answer.to_json()})
        session.append("step/end", {"turn": n, "step": 2})
        session.append("turn/end", {"turn": n, "reason": {"kind": "completed"}})


def json_records(session: Session) -> list[Record]:
    """The session's events as the JSON values a store keeps."""
    return [json.loads(json.dumps(e.to_json())) for e in session.events]


def events_of(build: Callable[[Session], None]) -> list[Record]:
    """The records ``build`` appends to an in-memory session (no persistence)."""
    session = Session(SessionHeader("scratch", 1.0))
    build(session)
    return json_records(session)


def two_turns(session: Session) -> None:
    turn(session, 1)
    turn(session, 2)


def one_and_a_half_turns(session: Session) -> None:
    turn(session, 1)
    turn(session, 2, close=False)


def same(a: Sequence[SessionEvent], b: Sequence[SessionEvent]) -> bool:
    return [e.to_json() for e in a] == [e.to_json() for e in b]


def append_user(session: Session, text: str, turn: int = 1) -> None:
    session.append("user/message", {"turn": turn, "message": Message.user(text).to_json()})


def chunk(session: Session, i: int) -> None:
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"i": i}})


def entries(path: Path) -> list[str]:
    """The names in directory ``path``, sorted."""
    return sorted(p.name for p in path.iterdir())


@asynccontextmanager
async def located_from_home(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    plugin: type[Any],
    *,
    key: str,
    default: str,
    home: str,
) -> AsyncIterator[tuple[Context, Any]]:
    """With ``tmp_path`` the current directory and ``tmp_path/home`` the home: the store
    ``plugin`` started without config keeps its sessions at ``default`` (relative to the
    current directory); started again with ``{key: "~/" + home}``, under the home. The
    context and that second store, running."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        first = await ctx.plugin(plugin)
        assert getattr(first.instance, key) == tmp_path / default
        await first.dispose()
        store = await ctx.plugin(plugin, {key: f"~/{home}", "fsync": False})
        assert getattr(store.instance, key) == tmp_path / "home" / home
        yield ctx, store


def sigkill_once_it_says(
    tmp_path: Path, driver: str, deployment: Path, line: str, *, stdin: bool = False
) -> None:
    """Run the script ``driver`` (written to ``tmp_path``) on ``deployment`` in
    ``tmp_path`` and SIGKILL it once it has printed ``line`` (with ``stdin``, its stdin
    is a pipe the test never writes to)."""
    (tmp_path / "driver.py").write_text(driver)
    command = [sys.executable, str(tmp_path / "driver.py"), str(deployment)]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    if stdin:
        pipes["stdin"] = subprocess.PIPE
    with subprocess.Popen(command, cwd=tmp_path, text=True, **pipes) as child:  # type: ignore[call-overload]
        try:
            said = child.stdout.readline()
            assert said == f"{line}\n", child.stderr.read()
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
        assert child.wait() == -signal.SIGKILL
