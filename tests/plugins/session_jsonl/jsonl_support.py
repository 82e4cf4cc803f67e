"""Helpers of the session-jsonl tests: a runtime with the backend, and session files
written (or read) by hand."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from dsh import Context
from dsh_session import Sessions
from dsh_session_jsonl import FILE_NAME, JsonlSessions

Runtime = tuple[Context, Sessions, JsonlSessions]


@asynccontextmanager
async def jsonl_runtime(root: Path, **config: Any) -> AsyncIterator[Runtime]:
    """A root with the store and the JSONL backend on ``root``."""
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        fiber = await ctx.plugin(JsonlSessions, {"root": str(root), **config})
        yield ctx, ctx.sessions, fiber.instance


def record_line(record: Any) -> bytes:
    """One line of a session file (without its newline)."""
    return json.dumps(record).encode()


def header_record(sid: str, created: float = 1.0, **extra: Any) -> dict[str, Any]:
    """The header line of session ``sid``."""
    return {"type": "session", "version": 1, "id": sid, "created_at": created, **extra}


def event_record(seq: int, kind: str, data: dict[str, Any], time: float = 1.0) -> dict[str, Any]:
    """An event line."""
    return {"seq": seq, "type": kind, "time": time, "data": data}


def write_session_file(root: Path, sid: str, records: list[Any], tail: bytes = b"") -> Path:
    """Session ``sid``'s file under ``root`` written by hand: ``records`` as lines (the
    header too, if any), then the raw ``tail``."""
    path = root / sid / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(record_line(r) + b"\n" for r in records) + tail)
    return path


def write_log(
    root: Path, sid: str, events: list[dict[str, Any]], tail: bytes = b"", created: float = 1.0
) -> Path:
    """A session file with its header, ``events`` as lines, then ``tail``."""
    return write_session_file(root, sid, [header_record(sid, created), *events], tail)


def file_records(path: Path) -> list[dict[str, Any]]:
    """Every line of a session file, parsed (the header first)."""
    return [json.loads(line) for line in path.read_bytes().splitlines()]
