"""``sessions.flush(session)``: each backend writes what it buffers of a live session
and reports what it could not store (what ``dsh run`` says when records are lost)."""

from __future__ import annotations

import pytest

from dsh import Context
from dsh_session import Sessions
from tests.plugins.session_store.store_support import Store, append_user

pytestmark = pytest.mark.anyio


async def test_flush_writes_the_buffered_records_of_a_live_session(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        session = sessions.create(id="s")
        append_user(session, "first")
        session.append("turn/start", {"turn": 1})  # buffered until the next commit
        assert [r["type"] for r in store.records("s")] == ["user/message"]
        assert sessions.flush(session) == []
        assert [r["type"] for r in store.records("s")] == ["user/message", "turn/start"]
        # A session this backend does not hold (it never went live here): nothing to do.
        assert sessions.flush(sessions.prepare(id="other")) == []


async def test_a_store_without_a_backend_has_nothing_unsaved() -> None:
    async with Context() as root:
        await root.plugin(Sessions)
        assert root.sessions.flush(root.sessions.create()) == []
