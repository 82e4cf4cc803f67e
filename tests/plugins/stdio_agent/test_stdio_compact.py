"""``/compact`` in the chat: what the ``compaction`` service did, on stdout."""

from __future__ import annotations

import pytest

from dsh import DshError
from dsh.testing import text
from dsh_agent import Agent
from dsh_compaction import NOTHING_TO_COMPACT, Compaction
from dsh_stdio_agent import EXIT_OK
from tests.plugins.stdio_agent.stdio_support import front_rig

pytestmark = pytest.mark.anyio

#: A window small enough that two short turns leave an older one to summarise.
WINDOW = {"context_window": 1000, "summary_max_tokens": 100}


async def test_compact_summarises_the_older_turns_and_says_so() -> None:
    replies = [text("one"), text("two"), text("the summary"), text("three")]
    plugins = ((Compaction, WINDOW),)
    async with front_rig(*replies, plugins=plugins) as r:
        # Each turn is longer than the recent history kept whole (640 characters).
        long = "x" * 800
        r.lines.feed("/compact", f"first {long}", f"second {long}", "/compact", "third", "/exit")
        assert await r.front.run() == EXIT_OK
        lines = r.out.getvalue().splitlines()
        assert lines[:3] == [NOTHING_TO_COMPACT, "one", "two"]
        assert lines[3] == (
            "Compacted turns 1-2 into a summary of about 3 tokens; no turn kept whole."
        )
        assert lines[4] == "three"
        checkpoints = [e for e in r.agent.session.events if e.type == "compaction/checkpoint"]
        assert [c.data["summary"] for c in checkpoints] == ["the summary"]


async def test_compact_is_the_compaction_plugin_s_command() -> None:
    async with front_rig() as r:
        assert r.root.slash_commands.get("compact") is None
        r.lines.feed("/compact", "/exit")
        assert await r.front.run() == EXIT_OK
        assert r.out.getvalue() == ""
        assert r.err.getvalue() == "unknown command /compact; /help lists the commands\n"


class Refused(DshError):
    code = "REFUSED"


class RefusingCompaction(Compaction):
    """A compaction service that cannot compact."""

    async def compact(self, agent: Agent) -> str:
        raise Refused(f'agent "{agent.id}" cannot be compacted')


async def test_a_compaction_error_is_shown_and_the_chat_goes_on() -> None:
    plugins = ((RefusingCompaction, WINDOW),)
    async with front_rig(text("still here"), plugins=plugins) as r:
        r.lines.feed("/compact", "hello", "/exit")
        assert await r.front.run() == EXIT_OK
        assert r.out.getvalue() == ('/compact: agent "main" cannot be compacted\nstill here\n')
