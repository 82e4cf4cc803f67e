"""Finding and reading Claude Code settings files."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._errors import HookSettingsError

__all__ = ["read_settings_files"]


def read_settings_files(project: Path, home: Path) -> list[tuple[Path, Mapping[str, Any]]]:
    """The settings files that exist, read: ``.claude/settings.json`` then
    ``.claude/settings.local.json`` of the project directory and of each directory
    above it (the home directory skipped), then ``~/.claude/settings.json``."""
    paths = [
        folder / ".claude" / name
        for folder in (project, *project.parents)
        if folder != home
        for name in ("settings.json", "settings.local.json")
    ]
    found: list[tuple[Path, Mapping[str, Any]]] = []
    for path in [*paths, home / ".claude" / "settings.json"]:
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise HookSettingsError(f"{path}: not valid JSON: {exc}") from None
            if not isinstance(data, dict):
                raise HookSettingsError(f"{path} must hold a JSON object")
            found.append((path, data))
    return found
