"""Agent Skills and Markdown slash commands (YAML name ``skills``).

``SKILL.md`` folders from the project's and the user's skill directories become the
``skills`` prompt section and the ``skill`` tool; ``.dsh/commands`` and
``.claude/commands`` files become slash commands. See this package's README.
"""

from __future__ import annotations

from ._commands import CommandFile, expand, find_commands, read_command
from ._frontmatter import FrontmatterError, split_frontmatter
from ._plugin import (
    SECTION,
    SECTION_ORDER,
    SkillArgs,
    SkillNotFoundError,
    Skills,
    SkillsConfig,
    command_dirs,
    skill_dirs,
)
from ._skills import SKILL_FILE, SKILL_NAME, Skill, SkillCache, check_skill

plugin = Skills

__all__ = [
    "SECTION",
    "SECTION_ORDER",
    "SKILL_FILE",
    "SKILL_NAME",
    "CommandFile",
    "FrontmatterError",
    "Skill",
    "SkillArgs",
    "SkillCache",
    "SkillNotFoundError",
    "Skills",
    "SkillsConfig",
    "check_skill",
    "command_dirs",
    "expand",
    "find_commands",
    "plugin",
    "read_command",
    "skill_dirs",
    "split_frontmatter",
]
