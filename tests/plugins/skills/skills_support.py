"""Helpers of the skills tests: a project, a home, skill and command files."""

from __future__ import annotations

from pathlib import Path

import pytest


def write_skill(
    directory: Path, name: str, description: str, body: str = "Do it.", **extra: str
) -> Path:
    """``<directory>/<name>/SKILL.md`` with that frontmatter; its path."""
    folder = directory / name
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        f"name: {name}",
        f"description: {description}",
        *(f"{k}: {v}" for k, v in extra.items()),
    ]
    path = folder / "SKILL.md"
    path.write_text("---\n" + "\n".join(lines) + f"\n---\n{body}\n")
    return path


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, Path]:
    """A home (``HOME``, no ``XDG_CONFIG_HOME``) and a project folder below it made the
    working directory; returns ``(home, project)``."""
    home = tmp_path / "home"
    project = tmp_path / "work" / "project"
    project.mkdir(parents=True)
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(project)
    return home, project
