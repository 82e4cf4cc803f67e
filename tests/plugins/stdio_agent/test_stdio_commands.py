"""The chat's commands are the registry's: ``/help`` and Tab completion list exactly
the registered ones, the same list ACP announces (plus the terminal's own)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from dsh.testing import text
from dsh_compaction import Compaction
from dsh_slash_commands import SlashCommand, SlashInvocation
from dsh_stdio_agent import EXIT_OK, StdioAgentError
from dsh_stdio_agent._terminal import SlashCompleter
from tests.plugins.acp.acp_support import acp_rig
from tests.plugins.stdio_agent.stdio_support import front_rig

pytestmark = pytest.mark.anyio

WINDOW = {"context_window": 1000, "summary_max_tokens": 100}
PLUGINS = ((Compaction, WINDOW),)
#: What the terminal registers for itself (an ACP session cannot quit or switch agents).
OWN = {"clear", "exit", "help", "model", "prompt", "sessions", "tokens"}


async def shout(invocation: SlashInvocation) -> None:
    invocation.reply(f"shouting {invocation.arguments}")
    await invocation.send(invocation.arguments.upper())


SHOUT = SlashCommand(name="shout", description="say it loud", run=shout, argument_hint="TEXT")


def completions(registry: object, typed: str) -> list[tuple[str, str, str]]:
    completer = SlashCompleter(registry)  # type: ignore[arg-type]
    return [
        (c.text, c.display_text, c.display_meta_text)
        for c in completer.get_completions(
            Document(typed), CompleteEvent(completion_requested=True)
        )
    ]


async def test_help_and_completion_list_exactly_the_registry() -> None:
    async with front_rig(text("LOUD"), plugins=PLUGINS) as r:
        registry = r.root.slash_commands
        undo = registry.register(SHOUT)
        r.lines.feed("/help", "/shout hey you", "/exit")
        assert await r.front.run() == EXIT_OK
        out = r.out.getvalue().splitlines()
        helped = [line.split()[0][1:] for line in out if line.startswith("  /")]
        names = [c.name for c in registry.list()]
        assert helped == names
        assert set(names) == OWN | {"compact", "shout"}
        assert "  /shout TEXT      say it loud" in out
        assert out[-2:] == ["shouting hey you", "LOUD"]
        assert r.model.requests[-1].messages[-1].text == "HEY YOU"
        assert [c[0] for c in completions(registry, "/")] == [f"/{n}" for n in names]
        assert completions(registry, "/sh") == [("/shout", "/shout TEXT", "say it loud")]
        assert completions(registry, "/shout x") == []
        assert completions(registry, "shout") == []
        await undo()
        assert completions(registry, "/sh") == []


async def test_terminal_and_acp_list_the_same_registered_commands(tmp_path: Path) -> None:
    async with front_rig(plugins=PLUGINS) as r:
        r.root.slash_commands.register(SHOUT)
        r.lines.feed("/help", "/exit")
        assert await r.front.run() == EXIT_OK
        out = r.out.getvalue().splitlines()
        terminal = {line.split()[0][1:] for line in out if line.startswith("  /")}
    async with acp_rig(tmp_path, plugins=PLUGINS) as a:
        a.root.slash_commands.register(SHOUT)
        await a.new()
        await a.client.wait_for(lambda: a.client.commands)
        acp = {c.name for c in a.client.commands[-1][1].available_commands}
    assert acp == {"compact", "shout"}
    assert terminal == acp | OWN


async def test_a_terminal_command_outside_a_chat_is_refused() -> None:
    async with front_rig() as r:
        replies: list[str] = []

        async def send(text: str) -> None:
            return None

        assert await r.root.slash_commands.dispatch(
            "/tokens", agent=r.agent, reply=replies.append, send=send, frontend="test"
        )
        (reply,) = replies
        assert reply.startswith("/tokens: the terminal's commands work only while its chat runs")
        with pytest.raises(StdioAgentError):
            r.front.running_chat()


async def test_its_commands_go_with_the_front_end() -> None:
    async with front_rig() as r:
        assert {c.name for c in r.root.slash_commands.list()} == OWN
        await r.root.frontend.home_ctx.fiber.dispose()
        assert r.root.slash_commands.list() == []


async def test_the_line_repl_runs_the_terminal_commands_too() -> None:
    async with front_rig() as r:
        r.lines.feed("/sessions", "/model nope", "/tokens", "/exit")
        assert await r.front.run() == EXIT_OK
        assert r.err.getvalue() == (
            "no session persistence is configured (add session-jsonl)\n"
            'unknown model "nope"; known models: scripted\n'
        )
        assert r.out.getvalue() == "0 turns: no tokens recorded\n"
