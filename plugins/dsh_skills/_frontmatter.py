"""YAML frontmatter of a Markdown file: ``---`` lines around a YAML mapping, then
the body."""

from __future__ import annotations

import re
from typing import Any

import yaml

from dsh import DshError

__all__ = ["FrontmatterError", "split_frontmatter"]

_FENCE = re.compile(r"---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE)


class FrontmatterError(DshError, ValueError):
    """A skill or command file's frontmatter is unusable (the message says why); the
    file is skipped with a warning naming it."""

    code = "SKILL_INVALID"


_LINE = re.compile(r"([A-Za-z][\w-]*)[ \t]*:[ \t]*(.*)")


def _lines(block: str) -> dict[str, Any]:
    """Frontmatter that is not YAML read as ``key: value`` lines, the values as text
    (Claude Code's command files write ``argument-hint: [pr] [priority]`` unquoted)."""
    fields: dict[str, Any] = {}
    for number, line in enumerate(block.splitlines(), start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.fullmatch(line.strip())
        if match is None:
            raise FrontmatterError(f"its frontmatter line {number} is not `name: value`")
        value = match[2].strip()
        if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        fields[match[1]] = value
    return fields


def split_frontmatter(
    text: str, *, required: bool, lenient: bool = False
) -> tuple[dict[str, Any], str]:
    """``(fields, body)`` of ``text``. Without a leading ``---`` line there are no
    fields (an error when ``required``). Raises :class:`FrontmatterError` for
    frontmatter that is not closed, not YAML, or not a mapping with string keys;
    ``lenient`` reads frontmatter that is not YAML as ``name: value`` lines instead."""
    text = text.removeprefix("\ufeff")
    if not text.startswith("---"):
        if required:
            raise FrontmatterError("it has no YAML frontmatter (a --- line first)")
        return {}, text
    match = _FENCE.match(text)
    if match is None:
        raise FrontmatterError("its frontmatter is not closed by a --- line")
    try:
        fields = yaml.safe_load(match[1])
    except yaml.YAMLError as exc:
        if lenient:
            return _lines(match[1]), text[match.end() :]
        mark = getattr(exc, "problem_mark", None)
        where = "" if mark is None else f" (line {mark.line + 2})"
        problem = getattr(exc, "problem", None) or "not YAML"
        raise FrontmatterError(f"its frontmatter is not valid YAML{where}: {problem}") from None
    if fields is None:
        fields = {}
    if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
        raise FrontmatterError("its frontmatter is not a mapping of names to values")
    return fields, text[match.end() :]
