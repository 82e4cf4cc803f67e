"""Markdown slash commands: ``<dir>/<name>.md`` files whose body, its arguments
expanded, is sent as the user's message (Claude Code's custom commands)."""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from dsh_slash_commands import COMMAND_NAME

from ._frontmatter import FrontmatterError, split_frontmatter

__all__ = ["CommandFile", "expand", "find_commands", "read_command"]

_log = logging.getLogger("dsh.skills")

_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9])")


@dataclass(frozen=True, slots=True)
class CommandFile:
    """One command file: its name (the file's without ``.md``), where it is, its
    frontmatter's ``description`` and ``argument-hint``, and its body."""

    name: str
    path: str
    description: str
    argument_hint: str
    body: str


def _words(arguments: str) -> list[str]:
    """The arguments split as a shell would (quotes group words); unbalanced quotes:
    split on whitespace."""
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


def expand(body: str, arguments: str) -> str:
    """``body`` with ``$ARGUMENTS`` replaced by ``arguments`` (as typed) and ``$1`` …
    ``$9`` by its words (quoted words count as one; a missing one is empty). Replaced
    text is never scanned again. A body without ``$ARGUMENTS`` gets non-empty
    arguments appended after a blank line, so they are never lost."""
    words = _words(arguments)

    def value(match: re.Match[str]) -> str:
        key = match[1]
        if key == "ARGUMENTS":
            return arguments
        index = int(key) - 1
        return words[index] if index < len(words) else ""

    text = _PLACEHOLDER.sub(value, body)
    if arguments and "$ARGUMENTS" not in body and not _PLACEHOLDER.search(body):
        text = f"{text.rstrip()}\n\n{arguments}"
    return text


def read_command(path: str) -> CommandFile:
    """The command of the Markdown file at ``path``. Raises :class:`OSError`,
    :class:`UnicodeDecodeError` or :class:`FrontmatterError`."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    fields, body = split_frontmatter(text, required=False, lenient=True)
    texts: dict[str, str] = {}
    for key in ("description", "argument-hint"):
        value = fields.get(key, "")
        if isinstance(value, list):  # argument-hint: [pr-number] reads as a YAML list
            value = " ".join(f"[{item}]" for item in value)
        if not isinstance(value, str):
            raise FrontmatterError(f"`{key}` must be a string")
        texts[key] = " ".join(value.split())
    name = os.path.basename(path).removesuffix(".md")
    description = texts["description"] or _first_line(body) or f"the {name} command file"
    return CommandFile(name, path, description, texts["argument-hint"], body.strip("\n"))


def _first_line(body: str) -> str:
    for line in body.splitlines():
        words = line.strip().lstrip("#").strip()
        if words:
            return words[:100]
    return ""


def find_commands(directories: Iterable[str]) -> dict[str, CommandFile]:
    """The command files of ``directories`` by name (``<name>.md`` directly in each);
    a name found earlier shadows the same name later. A file that cannot be read or
    whose name is no command name is skipped with a warning naming it."""
    found: dict[str, CommandFile] = {}
    for directory in directories:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for file_name in names:
            path = os.path.join(directory, file_name)
            name = file_name.removesuffix(".md")
            if not file_name.endswith(".md") or name in found or not os.path.isfile(path):
                continue
            if not COMMAND_NAME.fullmatch(name):
                _log.warning("skipped command file %s: %r is not a command name", path, name)
                continue
            try:
                found[name] = read_command(path)
            except (OSError, UnicodeDecodeError, FrontmatterError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else exc
                if isinstance(exc, UnicodeDecodeError):
                    reason = "it is not UTF-8 text"
                _log.warning("skipped command file %s: %s", path, reason)
    return found
