"""Slash commands over ACP: ``available_commands_update`` lists exactly the registry,
and a prompt naming a command runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh.testing import text
from dsh_compaction import Compaction
from dsh_slash_commands import SlashCommand, SlashInvocation
from tests.plugins.acp.acp_support import acp_rig

pytestmark = pytest.mark.anyio

WINDOW = {"context_window": 1000, "summary_max_tokens": 100}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def listed(update: Any) -> list[tuple[str, str, str | None]]:
    return [
        (c.name, c.description, None if c.input is None else c.input.root.hint)
        for c in update.available_commands
    ]


async def shout(invocation: SlashInvocation) -> None:
    invocation.reply(f"shouting {invocation.arguments!r}")
    await invocation.send(invocation.arguments.upper())


SHOUT = SlashCommand(name="shout", description="say it loud", run=shout, argument_hint="TEXT")


async def test_each_session_is_told_the_registered_commands_and_their_changes(
    tmp_path: Path,
) -> None:
    async with acp_rig(tmp_path, plugins=((Compaction, WINDOW),)) as r:
        session = await r.new()
        await r.client.wait_for(lambda: r.client.commands)
        ((to, update),) = r.client.commands
        assert to == session
        registry = r.root.slash_commands
        assert [name for name, _, _ in listed(update)] == [c.name for c in registry.list()]
        assert listed(update) == [("compact", "summarise the older history now", None)]
        undo = registry.register(SHOUT)
        await r.client.wait_for(lambda: len(r.client.commands) == 2)
        assert listed(r.client.commands[1][1]) == [
            ("compact", "summarise the older history now", None),
            ("shout", "say it loud", "TEXT"),
        ]
        await undo()
        await r.client.wait_for(lambda: len(r.client.commands) == 3)
        assert [name for name, _, _ in listed(r.client.commands[2][1])] == ["compact"]


async def test_a_prompt_naming_a_command_runs_it(tmp_path: Path) -> None:
    async with acp_rig(tmp_path, text("LOUD ANSWER")) as r:
        r.root.slash_commands.register(SHOUT)
        session = await r.new()
        assert await r.say(session, "/shout  hello there ") == "end_turn"
        assert r.client.text() == "shouting 'hello there'LOUD ANSWER"
        (request,) = r.model.requests
        assert request.messages[-1].text == "HELLO THERE"
        # Not a registered command: the text is the user's message as it is.
        r.model.reply(text("a path"))
        assert await r.say(session, "/tmp/x what is it") == "end_turn"
        assert r.model.requests[-1].messages[-1].text == "/tmp/x what is it"


async def test_a_command_that_sends_nothing_ends_the_turn(
    tmp_path: Path,
) -> None:
    async with acp_rig(tmp_path, plugins=((Compaction, WINDOW),)) as r:
        session = await r.new()
        assert await r.say(session, "/compact") == "end_turn"
        assert r.client.text() == "No compactable history yet."
        assert r.model.requests == []
