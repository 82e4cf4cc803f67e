"""An agent made for a session whose id another live session holds is refused, and
leaves nothing behind."""

from __future__ import annotations

import pytest

from dsh import Context
from dsh_agent_core import AgentCore
from dsh_session import SessionError

pytestmark = pytest.mark.anyio


async def test_a_session_whose_id_is_live_is_refused() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "never-called"})
        held = root.sessions.prepare(id="same")
        root.sessions.enter(held)
        other = root.sessions.prepare(id="same")
        with pytest.raises(SessionError, match='session "same" already exists'):
            root.agents.create(id="late", session=other)
        assert root.agents.get("late") is None
        assert root.sessions.get("same") is held
