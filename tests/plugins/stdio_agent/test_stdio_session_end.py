"""The terminal front-end ends its agent's session when its run ends (RFC 0036), while
every plugin still listens: the agent itself lives on until the deployment unloads."""

from __future__ import annotations

import pytest

from dsh.testing import text
from dsh_agent import Agent
from dsh_session import Session
from dsh_stdio_agent import EXIT_OK
from tests.plugins.stdio_agent.stdio_support import front_rig

pytestmark = pytest.mark.anyio


async def test_a_run_ends_the_session_it_started() -> None:
    async with front_rig(text("one"), text("two")) as r:
        heard: list[tuple[str, str]] = []

        def start(agent: Agent, session: Session) -> None:
            heard.append(("start", agent.id))

        def end(agent: Agent, session: Session) -> None:
            heard.append(("end", agent.id))

        r.root.on("session/start", start)
        r.root.on("session/end", end)
        assert await r.front.run(prompt="hi") == EXIT_OK
        assert heard == [("start", "main"), ("end", "main")]
        # Another run on the same agent is another session start and end.
        assert await r.front.run(prompt="again") == EXIT_OK
        assert heard[2:] == [("start", "main"), ("end", "main")]
