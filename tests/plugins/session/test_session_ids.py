"""The ids the store gives new sessions: random version-4 UUIDs, spelled in hex."""

from __future__ import annotations

import uuid

import pytest

from dsh import Context
from dsh_session import Sessions

pytestmark = pytest.mark.anyio


async def test_a_prepared_session_is_named_by_a_random_uuid4_in_hex() -> None:
    async with Context() as root:
        await root.plugin(Sessions)
        ids = [root.sessions.prepare().id for _ in range(64)]
    assert len(set(ids)) == len(ids)
    for sid in ids:
        parsed = uuid.UUID(hex=sid)
        assert (parsed.hex, parsed.version, parsed.variant) == (sid, 4, uuid.RFC_4122)


async def test_a_given_id_is_kept() -> None:
    async with Context() as root:
        await root.plugin(Sessions)
        assert root.sessions.prepare(id="mine").id == "mine"
