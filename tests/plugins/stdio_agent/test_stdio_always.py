"""The terminal's approval question offers "always" when a plugin remembers it
(``dsh_permissions``, RFC 0036): ``a`` persists a rule and the next run is not asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import text, tool_call, tool_calls
from dsh_approval import Approval
from dsh_bash import Bash
from dsh_bash_local import LocalBash
from dsh_permissions import Permissions
from dsh_stdio_agent import EXIT_OK
from dsh_tool_bash import ToolBash
from tests.plugins.stdio_agent.stdio_support import front_rig

pytestmark = pytest.mark.anyio

REMEMBERING: tuple[tuple[Any, Any], ...] = (
    (Bash, None),
    (LocalBash, None),
    (ToolBash, None),
    (Approval, {"policy": "ask"}),
    (Permissions, {}),
)


@pytest.mark.parametrize("key", ["a", "A"])
async def test_a_answers_always_and_the_rule_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    printf = tool_calls(tool_call("bash", {"command": "printf HI"}))
    replies = (printf, text("ran"), printf, text("again"))
    async with front_rig(*replies, plugins=REMEMBERING) as r:
        r.lines.feed("go", key, "again", "/exit")
        assert await r.front.run() == EXIT_OK
    out = r.both.getvalue()
    assert out.count("Allow bash: printf HI? [y/N/a] a\n") == 1
    assert out.count("[tool] bash -> HI\n") == 2
    saved = json.loads((tmp_path / ".dsh" / "settings.local.json").read_text())
    assert saved == {"permissions": {"allow": ["Bash(printf HI)"]}}
