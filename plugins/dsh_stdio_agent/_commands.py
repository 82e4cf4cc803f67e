"""The terminal's own slash commands, registered with ``slash_commands`` by the
``stdio-agent`` plugin: ``/help``, ``/exit``, ``/model``, ``/clear``, ``/tokens``,
``/sessions`` and ``/prompt``. Each runs on the chat that dispatched it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from dsh import DshError, counted
from dsh_agent import assemble_context_for
from dsh_slash_commands import SlashCommand, SlashInvocation
from dsh_system_prompt import render_prompt

from ._usage import session_usage, usage_text

if TYPE_CHECKING:
    from ._chat import Chat
    from ._service import StdioAgent

__all__ = ["help_lines", "terminal_commands"]

_Run = Callable[["Chat", SlashInvocation], Awaitable[None]]


def help_lines(commands: list[SlashCommand]) -> list[str]:
    """One ``  /name HINT   description`` line per command, the descriptions aligned."""
    heads = [f"/{c.name} {c.argument_hint}".rstrip() for c in commands]
    width = max([15, *(len(head) for head in heads)]) + 2
    return [
        f"  {head.ljust(width)}{c.description}" for head, c in zip(heads, commands, strict=True)
    ]


async def _help(chat: Chat, invocation: SlashInvocation) -> None:
    chat.say(chat.help_text(chat.owner.home_ctx.slash_commands.list()))


async def _exit(chat: Chat, invocation: SlashInvocation) -> None:
    chat.quitting = True


async def _model(chat: Chat, invocation: SlashInvocation) -> None:
    home = chat.owner.home_ctx
    agent = chat.agent
    served: list[str] = home.llm.models()
    known = ", ".join(served) or "(none)"
    name = invocation.arguments
    if not name:
        chat.say(f"model: {agent.model or '(none)'}; known models: {known}\n")
        return
    if name not in served:
        chat.warn(f'unknown model "{name}"; known models: {known}')
        return
    chat.switch(await home.agents.switch_model(agent.id, name))
    chat.say(f"model: {name} (from the next turn on)\n")


async def _clear(chat: Chat, invocation: SlashInvocation) -> None:
    home = chat.owner.home_ctx
    old = chat.agent.session.id
    chat.switch(await home.agents.renew(chat.agent.id))
    kept = bool(home.events.event("session/list").listeners())
    fate = "stays stored" if kept else "was not stored"
    chat.say(f"new session {chat.agent.session.id}\n  the previous one, {old}, {fate}\n")


async def _tokens(chat: Chat, invocation: SlashInvocation) -> None:
    session = chat.agent.session
    usage = session_usage(session)
    spent = "no tokens recorded" if usage is None else usage_text(usage)
    chat.say(f"{counted(session.last_turn(), 'turn')}: {spent}\n")


async def _sessions(chat: Chat, invocation: SlashInvocation) -> None:
    home = chat.owner.home_ctx
    if not home.events.event("session/list").listeners():
        chat.warn("no session persistence is configured (add session-jsonl)")
        return
    from dsh_session import describe_session  # only a listing needs it (docs/rfc/0055)

    current = chat.agent.session.id
    lines = [
        ("* " if item.id == current else "  ") + describe_session(item)
        for item in home.sessions.stored()
    ]
    chat.say("\n".join(lines) + "\n" if lines else "no stored sessions\n")


async def _prompt(chat: Chat, invocation: SlashInvocation) -> None:
    try:
        assembly = await chat.owner.home_ctx.system_prompt.assemble(
            assemble_context_for(chat.agent)
        )
        text = render_prompt(assembly)
    except DshError as exc:
        chat.note(f"[prompt] {exc}")
        return
    names = ", ".join(tool.name for tool in assembly.tools) or "(none)"
    chat.say(f"{text}\n\n--- tools ({len(assembly.tools)}): {names}\n")


#: ``(name, argument hint, description, run)`` of each terminal command.
_COMMANDS: list[tuple[str, str, str, _Run]] = [
    ("help", "", "this help", _help),
    ("exit", "", "quit (so does Ctrl-D)", _exit),
    ("model", "[NAME]", "show the model, or use NAME from the next turn on", _model),
    ("clear", "", "start a new session (a stored one can be resumed later)", _clear),
    ("tokens", "", "the tokens this session has used", _tokens),
    ("sessions", "", "the stored sessions (dsh run --resume ID continues one)", _sessions),
    ("prompt", "", "the system prompt and the tools the agent would get now", _prompt),
]


def terminal_commands(owner: StdioAgent) -> list[SlashCommand]:
    """The terminal's commands, each running on ``owner``'s running chat."""

    def on_chat(run: _Run) -> Callable[[SlashInvocation], Awaitable[None]]:
        async def command(invocation: SlashInvocation) -> None:
            await run(owner.running_chat(), invocation)

        return command

    return [
        SlashCommand(name=name, description=text, run=on_chat(run), argument_hint=hint)
        for name, hint, text, run in _COMMANDS
    ]
