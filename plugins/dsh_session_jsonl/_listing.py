"""Listing the sessions stored under a root without loading them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from dsh import DshError
from dsh_llm import LlmFormatError, Message, Usage, add_usage
from dsh_session import (
    META_EVENT,
    ChunkRun,
    LogDamage,
    OpaqueEvent,
    SessionEvent,
    SessionReadError,
    SessionSummary,
    check_log,
    fold_meta,
    recent_first,
)

from ._format import (
    FILE_NAME,
    SESSION_ID,
    InvalidRecord,
    decode_line,
    parse_event,
    parse_header,
    parse_record,
)

__all__ = ["TITLE_CHARS", "SessionSummary", "list_sessions"]

_TAIL = 1 << 16
#: The forward scan parses only the lines that name these (the records it reads).
_USER = b'"user/message"'
_ASSISTANT = b'"assistant/message"'
_USAGE = b'"usage"'
_META = b'"session/meta"'
#: The longest title kept (``dsh sessions`` shortens it further).
TITLE_CHARS = 200


def _last_events(
    file: BinaryIO, start: int, size: int
) -> tuple[SessionEvent | None, SessionEvent | None]:
    """The last valid record of a built-in type and the last valid record of any type
    (an opaque one counts: it is history) between ``start`` and ``size``, reading from
    the end."""
    block = _TAIL
    latest: SessionEvent | None = None
    while True:
        low = max(start, size - block)
        file.seek(low)
        lines = file.read(size - low).split(b"\n")
        if low > start:
            del lines[0]  # may begin mid-line
        for line in reversed(lines):
            try:
                record = parse_record(line)
            except InvalidRecord:
                continue
            if isinstance(record, ChunkRun):  # a packed row: its last chunk
                record = record.member(len(record) - 1)
            latest = latest or record
            if not isinstance(record, OpaqueEvent):
                return record, latest
        if low == start:
            return None, latest
        block *= 4


def _scan(
    file: BinaryIO, start: int, size: int
) -> tuple[str | None, Usage | None, list[SessionEvent]]:
    """The title, the summed usage and the header amendments (``session/meta``) of the
    records between ``start`` and ``size``, reading forward; lines that do not parse
    are skipped."""
    file.seek(start)
    title: str | None = None
    usage: Usage | None = None
    amendments: list[SessionEvent] = []
    position = start
    for line in file:
        position += len(line)
        if position > size:
            break
        if not (
            (title is None and _USER in line)
            or (_ASSISTANT in line and _USAGE in line)
            or _META in line
        ):
            continue
        try:
            event = parse_event(line)
        except InvalidRecord:
            continue
        data = event.data
        if event.type == META_EVENT:
            amendments.append(event)
        elif event.type == "user/message" and title is None:
            title = Message.from_json(data["message"]).text[:TITLE_CHARS]
        elif event.type == "assistant/message" and "usage" in data:
            try:
                more = Usage.from_json(data["usage"])
            except LlmFormatError:
                continue
            usage = more if usage is None else add_usage(usage, more)
    return title, usage, amendments


def _damage(file: BinaryIO, start: int, size: int) -> str | None:
    """What makes the records between ``start`` and ``size`` a log that loading
    refuses (the rule of ``dsh_session.check_log``: an invalid record with a committed
    turn end after it, or a seq gap), or None. A torn last line is no damage."""
    file.seek(start)
    lines = file.read(size - start).split(b"\n")[:-1]  # the part after the last newline is torn
    try:
        check_log(map(decode_line, lines), label=lambda index: f"line {index + 2}")
    except LogDamage as exc:
        return f"damaged at line {exc.index + 2}: {exc.problem}"
    return None


def _summarize(session_id: str, path: Path) -> SessionSummary | None:
    """The summary of the session file ``path``; None when no file was published
    there (a crash during creation left only the directory)."""
    try:
        with path.open("rb") as file:
            first = file.readline()
            if not first.endswith(b"\n"):
                return SessionSummary(session_id, path, error=f"{path}:1: no complete header")
            header = parse_header(first, str(path), session_id)
            size = os.fstat(file.fileno()).st_size
            damage = _damage(file, len(first), size)
            if damage is not None:
                return SessionSummary(session_id, path, error=f"{path}: {damage}")
            last, latest = _last_events(file, len(first), size)
            title, usage, amendments = _scan(file, len(first), size)
    except FileNotFoundError:
        return None
    except (OSError, DshError) as exc:
        return SessionSummary(session_id, path, error=str(exc))
    header = fold_meta(header, amendments)
    return SessionSummary.of(path, header, last, title=title, usage=usage, latest=latest)


def list_sessions(root: str | os.PathLike[str]) -> list[SessionSummary]:
    """One summary per session stored under ``root``, most recent activity first,
    unreadable ones last (with ``error`` set). A missing root lists nothing, and so
    does a directory holding no published session file.

    Reads only each file's header and its last records: nothing is locked, loaded or
    written, so it is safe while sessions are live.
    """
    base = Path(root)
    try:
        with os.scandir(base) as scan:
            entries = list(scan)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SessionReadError(f"cannot list the session root {base}: {exc}") from exc
    found = [
        _summarize(entry.name, base / entry.name / FILE_NAME)
        for entry in entries
        if SESSION_ID.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
    ]
    summaries = [summary for summary in found if summary is not None]
    summaries.sort(key=recent_first)
    return summaries
