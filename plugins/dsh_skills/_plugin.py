"""The ``skills`` plugin: Agent Skills in the prompt and the ``skill`` tool, and the
Markdown command files as slash commands."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dsh import Context, Disposer, DshError, Plugin
from dsh_slash_commands import DuplicateSlashCommandError, SlashCommand, SlashInvocation
from dsh_system_prompt import AssembleContext, PromptSection
from dsh_tools import Tool, ToolCall

from ._commands import CommandFile, expand, find_commands, read_command
from ._skills import Skill, SkillCache

__all__ = [
    "SECTION",
    "SECTION_ORDER",
    "SkillArgs",
    "SkillNotFoundError",
    "Skills",
    "SkillsConfig",
    "command_dirs",
    "skill_dirs",
]

_log = logging.getLogger("dsh.skills")

#: The section listing the skills, and its order (after the project context).
SECTION = "skills"
SECTION_ORDER = 60
#: The variable whose value is the list (values are never scanned for ``{{…}}``).
VARIABLE = "skills"
_REFERENCE = "{{" + VARIABLE + "}}"

_INTRO = (
    "Skills are folders of instructions, scripts and files for particular tasks. When a "
    "task matches a skill's description, call `skill` with its name and follow what it "
    "returns before you start. Available skills:"
)

_TOOL_DESCRIPTION = (
    "Read a skill's instructions (the body of its SKILL.md) and the folder its bundled "
    "files are in. Call it when the task matches a skill listed in the system prompt, "
    "before acting on the task."
)


class SkillNotFoundError(DshError, LookupError):
    """``skill(name)`` named no skill the calling agent can see."""

    code = "SKILL_NOT_FOUND"


class SkillArgs(BaseModel):
    """The skill to read."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The skill's name, as the system prompt lists it.")


class SkillsConfig(BaseModel):
    """Config of the ``skills`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: More skill directories (``~`` expanded, relative ones from the process's
    #: working directory), after the project's and the user's.
    paths: list[str] = Field(default_factory=list)
    #: Look in ``~/.config/dsh/skills`` and ``~/.claude/skills`` (and the command
    #: folders beside them).
    user: bool = True
    #: Register the Markdown command files as slash commands.
    commands: bool = True
    #: How long, in seconds, a skill list is used before its folders are looked at
    #: again (0: at every prompt assembly).
    recheck_seconds: float = Field(default=1.0, ge=0)


def _config_home() -> Path:
    configured = os.environ.get("XDG_CONFIG_HOME")
    return Path(configured) if configured else Path.home() / ".config"


def _project(cwd: str, kind: str) -> list[str]:
    """``<folder>/.dsh/<kind>`` and ``<folder>/.claude/<kind>`` from ``cwd`` up to the
    filesystem root, nearest first."""
    found = []
    folder = os.path.realpath(cwd)
    while True:
        found += [os.path.join(folder, ".dsh", kind), os.path.join(folder, ".claude", kind)]
        parent = os.path.dirname(folder)
        if parent == folder:
            return found
        folder = parent


def _user(kind: str) -> list[str]:
    return [str(_config_home() / "dsh" / kind), str(Path.home() / ".claude" / kind)]


def skill_dirs(cwd: str, config: SkillsConfig) -> list[str]:
    """The skill directories of ``cwd`` in precedence order: the project's (nearest
    folder first, ``.dsh`` before ``.claude``), the user's, then ``paths``."""
    extra = [os.path.abspath(os.path.expanduser(p)) for p in config.paths]
    return [*_project(cwd, "skills"), *(_user("skills") if config.user else []), *extra]


def command_dirs(cwd: str, config: SkillsConfig) -> list[str]:
    """The command directories of ``cwd`` in precedence order: the project's (nearest
    first, ``.dsh`` before ``.claude``), then the user's."""
    return [*_project(cwd, "commands"), *(_user("commands") if config.user else [])]


def _one_line(text: str) -> str:
    return " ".join(text.split())


class Skills(Plugin):
    """Registers the ``skills`` section (order 60), the ``skill`` tool and (with
    ``commands``) one slash command per Markdown command file."""

    name = "skills"
    Config = SkillsConfig
    inject = ("system_prompt", "tools", "slash_commands")

    def __init__(self, ctx: Context, config: SkillsConfig) -> None:
        super().__init__(ctx, config)
        #: The skill files read so far (shared by every agent: keyed by path).
        self.cache = SkillCache()
        self._lists: dict[str, tuple[float, dict[str, Skill], str]] = {}
        #: The last ``{{skills}}`` value and its assembly context, until its section
        #: text is asked for (then dropped: no agent is kept alive by it).
        self._resolved: tuple[AssembleContext, str] | None = None

    def setup(self) -> Iterator[Disposer]:
        ctx = self.ctx
        yield ctx.system_prompt.section(
            PromptSection(name=SECTION, order=SECTION_ORDER, text=self._section)
        )
        yield ctx.system_prompt.variable(VARIABLE, self._listing)
        yield ctx.tools.register(
            Tool(
                name="skill", description=_TOOL_DESCRIPTION, parameters=SkillArgs, execute=self.run
            )
        )
        if self.config.commands:
            for command in find_commands(command_dirs(os.getcwd(), self.config)).values():
                try:
                    yield ctx.slash_commands.register(self._slash(command))
                except DuplicateSlashCommandError as exc:
                    _log.warning("skipped command file %s: %s", command.path, exc)

    # -- skills -------------------------------------------------------------------------

    def skills(self, cwd: str | None = None) -> dict[str, Skill]:
        """The skills an agent working in ``cwd`` (default: the process's) sees, by
        name: looked at again after ``recheck_seconds``."""
        return self._list(cwd or os.getcwd())[0]

    def _list(self, cwd: str) -> tuple[dict[str, Skill], str]:
        now = time.monotonic()
        kept = self._lists.get(cwd)
        if kept is not None and now - kept[0] < self.config.recheck_seconds:
            return kept[1], kept[2]
        found = self.cache.skills(skill_dirs(cwd, self.config))
        if kept is not None and found == kept[1]:
            listing = kept[2]  # the same string: the prompt's render cache holds
        else:
            lines = [f"- {s.name}: {_one_line(s.description)}" for s in found.values()]
            listing = "\n".join([_INTRO, *lines]) if lines else ""
        self._lists[cwd] = (now, found, listing)
        return found, listing

    def _listing(self, context: AssembleContext) -> str:
        """The ``{{skills}}`` value: the list the context's agent sees, the same string
        while it is unchanged."""
        agent: Any = context.agent
        cwd: str | None = None if agent is None else agent.cwd
        listing = self._list(cwd or os.getcwd())[1]
        self._resolved = (context, listing)
        return listing

    def _section(self, context: AssembleContext) -> str:
        """The section's text: the list itself, a literal the prompt's render plan
        keeps (a text that is only a reference is rendered section by section at every
        assembly); the ``{{skills}}`` reference when the list has ``{{`` in it, so that
        braces in descriptions stay literal (a value is never scanned)."""
        # The variables are resolved before the texts: this assembly's value is known.
        resolved, self._resolved = self._resolved, None
        listing = resolved[1] if resolved is not None and resolved[0] is context else None
        if listing is None:
            listing = self._listing(context)
            self._resolved = None
        return _REFERENCE if "{{" in listing else listing

    async def run(self, args: SkillArgs, call: ToolCall) -> str:
        """The ``skill`` tool: the named skill's folder and body, read now."""
        agent: Any = call.agent
        cwd = (None if agent is None else agent.cwd) or os.getcwd()
        self._lists.pop(cwd, None)  # look again: the model asks for what is there now
        found = self._list(cwd)[0]
        skill = found.get(args.name)
        if skill is None:
            known = ", ".join(found) or "(none)"
            raise SkillNotFoundError(f'no skill is called "{args.name}"; the skills: {known}')
        return (
            f'<skill name="{skill.name}" folder="{skill.folder}">\n'
            f"Paths in these instructions are relative to {skill.folder}.\n\n"
            f"{skill.body}\n</skill>"
        )

    # -- command files ------------------------------------------------------------------

    def _slash(self, command: CommandFile) -> SlashCommand:
        return SlashCommand(
            name=command.name,
            description=command.description,
            argument_hint=command.argument_hint,
            run=functools.partial(self._send_command, command.path),
        )

    async def _send_command(self, path: str, invocation: SlashInvocation) -> None:
        """``/name arguments``: the file's body as it is now, arguments expanded, as
        the user's message."""
        try:
            command = read_command(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise SkillNotFoundError(f"the command file {path} cannot be read: {exc}") from None
        await invocation.send(expand(command.body, invocation.arguments))
