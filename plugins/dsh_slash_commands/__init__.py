"""The slash-command registry (service ``slash_commands``, YAML ``slash-commands``).

Plugins register ``/name`` commands; the terminal and ACP front-ends list and run
exactly the registered ones. ``agent-core`` starts it. See this package's README.
"""

from __future__ import annotations

from ._service import SlashCommands, SlashCommandsConfig, SlashCommandsSpecs
from ._types import (
    COMMAND_NAME,
    DuplicateSlashCommandError,
    SlashCommand,
    SlashCommandError,
    SlashInvocation,
    split_command,
)

plugin = SlashCommands

__all__ = [
    "COMMAND_NAME",
    "DuplicateSlashCommandError",
    "SlashCommand",
    "SlashCommandError",
    "SlashCommands",
    "SlashCommandsConfig",
    "SlashCommandsSpecs",
    "SlashInvocation",
    "plugin",
    "split_command",
]
