"""What the tests of the plugins that read Claude Code settings files (hooks,
permissions) share: a home folder of the test's own and settings files written as given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``tmp_path/home``, made ``$HOME`` for the test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def write_settings(path: Path, data: object) -> Path:
    """``data`` at ``path`` (its folders made): a string as it is, anything else as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path
