"""The Claude Code settings files (and dsh's own local one): finding, reading, updating.

``dsh_permissions`` reads their ``permissions`` key and ``dsh_hooks`` their ``hooks``
key, through the same two public functions.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh import DshError

__all__ = [
    "DSH_LOCAL_SETTINGS",
    "SettingsError",
    "SettingsFile",
    "add_rule",
    "load_settings",
    "project_dir",
    "settings_files",
]

#: Where an "always" answer is persisted, relative to the project directory.
DSH_LOCAL_SETTINGS = Path(".dsh") / "settings.local.json"

#: The project files looked for in each directory from the cwd up, with their kind.
_PROJECT_FILES = (
    (Path(".claude") / "settings.json", "project"),
    (Path(".claude") / "settings.local.json", "local"),
    (DSH_LOCAL_SETTINGS, "dsh-local"),
)
#: What marks a directory as a project (where an "always" rule is written).
_PROJECT_MARKS = (".dsh", ".claude", ".git")


class SettingsError(DshError, ValueError):
    """A settings file cannot be used: it is not JSON (``<file>:<line>:<column>: …``),
    not a JSON object, or a key holds the wrong kind of value (the message names the
    file and the key); or it cannot be read or written."""

    code = "PERMISSION_SETTINGS"


@dataclass(frozen=True)
class SettingsFile:
    """One settings file that exists: its ``path``, its ``kind`` (``"project"``:
    ``.claude/settings.json``, ``"local"``: ``.claude/settings.local.json``,
    ``"dsh-local"``: ``.dsh/settings.local.json``, ``"user"``:
    ``~/.claude/settings.json``) and the ``project`` directory it belongs to (the one
    holding ``.claude``/``.dsh``; the home directory for the user's file)."""

    path: Path
    kind: str
    project: Path


def _home() -> Path:
    return Path(os.path.expanduser("~"))


def _upwards(cwd: str | os.PathLike[str]) -> Iterator[Path]:
    """``cwd`` and its parents, without the home directory (its ``.claude`` holds the
    user's settings, not a project's)."""
    home = _home()
    start = Path(os.path.abspath(cwd))
    for directory in (start, *start.parents):
        if directory != home:
            yield directory


def settings_files(cwd: str | os.PathLike[str]) -> list[SettingsFile]:
    """The settings files that exist for work in ``cwd``: in each directory from
    ``cwd`` up (nearest first, the home directory skipped) its
    ``.claude/settings.json``, ``.claude/settings.local.json`` and
    ``.dsh/settings.local.json``, then the user's ``~/.claude/settings.json``."""
    found: list[SettingsFile] = []
    for directory in _upwards(cwd):
        for relative, kind in _PROJECT_FILES:
            path = directory / relative
            if path.is_file():
                found.append(SettingsFile(path, kind, directory))
    home = _home()
    user = home / ".claude" / "settings.json"
    if user.is_file():
        found.append(SettingsFile(user, "user", home))
    return found


def load_settings(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON object in the settings file ``path``. Raises :class:`SettingsError`
    naming the file (and the line and column of a JSON error)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: cannot read the settings file: {exc}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise SettingsError(
            f"{path}: a settings file must hold a JSON object, got {type(data).__name__}"
        )
    return data


def project_dir(cwd: str | os.PathLike[str]) -> Path:
    """The project of work in ``cwd``: the nearest directory from ``cwd`` up (the
    home directory skipped) holding ``.dsh``, ``.claude`` or ``.git``; else ``cwd``."""
    for directory in _upwards(cwd):
        if any((directory / mark).exists() for mark in _PROJECT_MARKS):
            return directory
    return Path(os.path.abspath(cwd))


def add_rule(path: str | os.PathLike[str], kind: str, rule: str) -> bool:
    """Add ``rule`` to the ``permissions.<kind>`` list of the settings file ``path``
    (made, with its directory, when missing), keeping every other key; the file is
    replaced atomically. Returns False when the rule was there already. Raises
    :class:`SettingsError` for a file that is not a settings object (it is left as
    it was) or cannot be written."""
    target = Path(path)
    data = load_settings(target) if target.exists() else {}
    permissions = data.setdefault("permissions", {})
    if not isinstance(permissions, dict):
        raise SettingsError(f'{target}: "permissions" must be an object')
    rules = permissions.setdefault(kind, [])
    if not isinstance(rules, list):
        raise SettingsError(f'{target}: "permissions.{kind}" must be a list of rules')
    if rule in rules:
        return False
    rules.append(rule)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=2)
                out.write("\n")
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        raise SettingsError(f"{target}: cannot write the settings file: {exc}") from exc
    return True
