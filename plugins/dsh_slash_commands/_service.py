"""The ``SlashCommands`` service (ctx key ``slash_commands``): the ``/name`` commands
every front-end lists and runs."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, DshError, Fiber, Service, hookspec

from ._types import (
    COMMAND_NAME,
    DuplicateSlashCommandError,
    SlashCommand,
    SlashCommandError,
    SlashInvocation,
    split_command,
)

__all__ = ["SlashCommands", "SlashCommandsConfig", "SlashCommandsSpecs"]

_log = logging.getLogger("dsh.slash-commands")


class SlashCommandsSpecs:
    """The events owned by the slash-command registry."""

    @hookspec
    def slash_commands_change(self) -> None:
        """A command was registered or removed (emitted, unfiltered)."""


class SlashCommandsConfig(BaseModel):
    """Config of ``slash-commands``: it has no settings (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


def _who(fiber: Fiber | None) -> str:
    return "(unknown)" if fiber is None else f'"{fiber.name}"'


class SlashCommands(Service):
    """The registry of slash commands (ctx key ``slash_commands``).

    Plugins register commands; front-ends list them (:meth:`list`) and run what the
    user types (:meth:`dispatch`). ``agent-core`` starts it, so every deployment of an
    agent has one.
    """

    key = "slash_commands"
    name = "slash-commands"
    Config = SlashCommandsConfig
    hookspecs = SlashCommandsSpecs

    def __init__(self, ctx: Context, config: Any = None) -> None:
        ctx.events.add_hookspecs(SlashCommandsSpecs)
        self._commands: dict[str, tuple[SlashCommand, Fiber | None]] = {}
        super().__init__(ctx, config)

    def register(self, command: SlashCommand) -> Disposer:
        """Add ``command`` for the calling plugin; returns the exact disposer of the
        registration (undone when that plugin unloads).

        Raises, leaving nothing behind, :class:`SlashCommandError` for something that
        is not a :class:`SlashCommand`, a name that does not match
        :data:`COMMAND_NAME` (give it without the ``/``) or a ``run`` that is not
        callable, and :class:`DuplicateSlashCommandError` naming both plugins when the
        name is taken.
        """
        checked: object = command
        if not isinstance(checked, SlashCommand):
            raise SlashCommandError(
                f"slash_commands.register() expects a SlashCommand, got {type(checked).__name__}"
            )
        name: object = command.name
        if not isinstance(name, str) or not COMMAND_NAME.fullmatch(name):
            raise SlashCommandError(
                f"invalid slash command name {name!r}: give it without the /, matching "
                f"{COMMAND_NAME.pattern}"
            )
        for field in ("description", "argument_hint"):
            value: object = getattr(command, field)
            if not isinstance(value, str):
                raise SlashCommandError(
                    f'slash command "/{name}": {field} must be a string, got {type(value).__name__}'
                )
        if command.run is None or not callable(command.run):
            raise SlashCommandError(f'slash command "/{name}": run must be an async function')
        ctx = self.ctx
        held = self._commands.get(name)
        if held is not None:
            raise DuplicateSlashCommandError(
                f'slash command "/{name}" of {_who(ctx.fiber)} is already registered by '
                f"{_who(held[1])}",
                kind="slash command",
                name=name,
                holder=held[1],
                claimant=ctx.fiber,
            )

        def body() -> Iterator[Callable[[], None]]:
            self._commands[name] = (command, ctx.fiber)
            yield functools.partial(self._remove, name, command)
            self._changed()

        return ctx.effect(body, label=f"slash command /{name}")

    def _remove(self, name: str, command: SlashCommand) -> None:
        del self._commands[name]
        self._changed()

    def _changed(self) -> None:
        self.home_ctx.emit("slash-commands/change")

    def list(self) -> list[SlashCommand]:
        """Every registered command, by name."""
        return [self._commands[name][0] for name in sorted(self._commands)]

    def get(self, name: str) -> SlashCommand | None:
        """The command called ``name`` (without the ``/``), or None."""
        held = self._commands.get(name)
        return None if held is None else held[0]

    async def dispatch(
        self,
        text: str,
        *,
        agent: Any,
        reply: Callable[[str], None],
        send: Callable[[str], Awaitable[None]],
        frontend: str,
        switch: Callable[[Any], None] | None = None,
    ) -> bool:
        """Run the command ``text`` names (``/name arguments``); False when ``text`` is
        not a registered command (the front-end says so, or sends it as a message).

        The keyword arguments make the :class:`SlashInvocation`. A command that
        raises a :class:`~dsh.DshError` gets its message shown through ``reply``;
        another exception is logged with its traceback and reported the same way, so
        a broken command never ends the chat. Cancellation propagates.
        """
        parsed = split_command(text)
        command = None if parsed is None else self.get(parsed[0])
        if parsed is None or command is None:
            return False
        invocation = SlashInvocation(
            command=command,
            arguments=parsed[1],
            agent=agent,
            reply=reply,
            send=send,
            frontend=frontend,
            switch=switch,
        )
        try:
            assert command.run is not None  # register refuses a command without one
            await command.run(invocation)
        except DshError as exc:
            reply(f"/{command.name}: {exc}\n")
        except Exception as exc:
            _log.error("slash command /%s failed", command.name, exc_info=exc)
            reply(f"/{command.name} failed: {type(exc).__name__}: {exc}\n")
        return True
