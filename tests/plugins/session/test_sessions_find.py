"""``sessions.find`` (ids and their unique prefixes) and ``sessions.newest``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dsh_session import SessionError
from tests.plugins.session_jsonl.jsonl_support import (
    event_record,
    header_record,
    jsonl_runtime,
    write_session_file,
)

pytestmark = pytest.mark.anyio


def stored(root: Path, sid: str, when: float) -> None:
    write_session_file(
        root, sid, [header_record(sid, when), event_record(0, "turn/start", {"turn": 1}, when)]
    )


async def test_find_takes_an_id_or_its_unique_start(tmp_path: Path) -> None:
    for number, sid in enumerate(["abc", "abc1", "abd7", "b00"]):
        stored(tmp_path, sid, float(number))
    async with jsonl_runtime(tmp_path) as (_ctx, sessions, _plugin):
        assert sessions.find("abc").id == "abc"  # the whole id wins over longer ones
        assert sessions.find("abd").id == "abd7"
        assert sessions.find("b").id == "b00"
        with pytest.raises(SessionError) as info:
            sessions.find("ab")
        assert str(info.value) == (
            'the session id prefix "ab" is ambiguous: it starts abc, abc1, abd7; '
            "give more of the id"
        )
        with pytest.raises(SessionError, match=r'^no stored session "z" \(dsh sessions lists'):
            sessions.find("z")
        with pytest.raises(SessionError, match="cannot be empty"):
            sessions.find("")


async def test_newest_is_the_latest_readable_activity(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_ctx, sessions, _plugin):
        assert sessions.newest() is None
    stored(tmp_path, "old", 1.0)
    stored(tmp_path, "new", 5.0)
    write_session_file(tmp_path, "broken", [{"type": "nope"}])
    async with jsonl_runtime(tmp_path) as (ctx, sessions, _plugin):
        newest = sessions.newest()
        assert newest is not None
        assert newest.id == "new"

        # Another backend's entry that is newer but cannot be read is passed over.
        def more(found: list[Any]) -> None:
            found.append(SimpleNamespace(id="bad", last_activity=99.0, error="unreadable"))

        ctx.on("session/list", more)
        assert sessions.stored()[0].id == "bad"
        newest = sessions.newest()
        assert newest is not None
        assert newest.id == "new"
