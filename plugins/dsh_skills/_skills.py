"""Agent Skills: ``<dir>/<name>/SKILL.md`` folders, checked by the agentskills.io
rules, found in an ordered list of skill directories and kept while unchanged."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsh_context_files import StatCache, stat_signature

from ._frontmatter import FrontmatterError, split_frontmatter

__all__ = ["SKILL_FILE", "SKILL_NAME", "Skill", "SkillCache", "check_skill"]

_log = logging.getLogger("dsh.skills")

#: The file that makes a folder a skill.
SKILL_FILE = "SKILL.md"
#: A skill's name: lowercase letters and digits in hyphen-separated runs (no leading,
#: trailing or doubled hyphen), 64 characters at most.
SKILL_NAME = re.compile(r"(?=.{1,64}\Z)[a-z0-9]+(?:-[a-z0-9]+)*")

_LIMITS = {"description": 1024, "compatibility": 500}


@dataclass(frozen=True, slots=True)
class Skill:
    """One valid skill: its name and description, its folder and ``SKILL.md``, the
    body after the frontmatter, and every frontmatter field as written."""

    name: str
    description: str
    folder: str
    path: str
    body: str
    fields: Mapping[str, Any]


def _text(fields: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = fields.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise FrontmatterError(f"`{key}` must be a non-empty string")
    limit = _LIMITS.get(key)
    if limit is not None and len(value) > limit:
        raise FrontmatterError(f"`{key}` is {len(value)} characters long (at most {limit})")
    return value


def check_skill(path: str, text: str) -> Skill:
    """The skill of ``SKILL.md`` at ``path`` with content ``text``; raises
    :class:`FrontmatterError` saying what breaks the agentskills.io rules."""
    fields, body = split_frontmatter(text, required=True)
    folder = os.path.dirname(path)
    name = _text(fields, "name", required=True)
    assert name is not None
    if not SKILL_NAME.fullmatch(name):
        raise FrontmatterError(
            f"`name` {name!r} must be 1-64 lowercase letters, digits and single hyphens "
            "(not first or last)"
        )
    if name != os.path.basename(folder):
        raise FrontmatterError(
            f"`name` {name!r} is not the name of its folder {os.path.basename(folder)!r}"
        )
    description = _text(fields, "description", required=True)
    assert description is not None
    _text(fields, "compatibility", required=False)
    _text(fields, "license", required=False)
    _text(fields, "allowed-tools", required=False)
    metadata = fields.get("metadata")
    if metadata is not None and not (
        isinstance(metadata, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        raise FrontmatterError("`metadata` must map strings to strings")
    return Skill(name, description, folder, path, body.strip("\n"), fields)


class SkillCache(StatCache[Skill]):
    """The skills of each directory, re-read only when something in it changed.

    A directory's listing is kept with its ``stat`` signature, and each ``SKILL.md``
    with its own: :meth:`skills` costs one ``stat`` per directory and one per skill
    when nothing changed. An invalid skill is warned about once per change of its
    file, naming it.
    """

    def __init__(self) -> None:
        super().__init__()  # ``reads`` counts the SKILL.md files read
        self._dirs: dict[str, tuple[tuple[int, ...], list[str]]] = {}

    def skills(self, directories: Iterable[str]) -> dict[str, Skill]:
        """The skills of ``directories`` by name; a name found in an earlier
        directory shadows the same name later."""
        found: dict[str, Skill] = {}
        for directory in directories:
            for folder in self._folders(directory):
                skill = self.get(os.path.join(directory, folder, SKILL_FILE))
                if skill is not None and skill.name not in found:
                    found[skill.name] = skill
        return found

    def _folders(self, directory: str) -> list[str]:
        try:
            signature = stat_signature(os.stat(directory))
            cached = self._dirs.get(directory)
            if cached is not None and cached[0] == signature:
                return cached[1]
            names = sorted(os.listdir(directory))
        except OSError:  # not there, not a folder, not readable: no skills
            self._dirs.pop(directory, None)
            return []
        self._dirs[directory] = (signature, names)
        return names

    def _read(self, path: str) -> Skill | None:
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            _log.warning("skipped skill %s: %s", path, reason)
            return None
        try:
            return check_skill(path, text)
        except FrontmatterError as exc:
            _log.warning("skipped skill %s: %s", path, exc)
            return None
