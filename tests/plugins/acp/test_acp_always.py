"""ACP's "always allow" answers ``"always"`` (RFC 0036): with ``dsh_permissions``
loaded the rule is persisted for the project, beyond the session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_acp import ALLOW_ALWAYS
from dsh_permissions import Permissions
from tests.plugins.acp.acp_support import RecordingClient, acp_rig
from tests.plugins.acp.test_acp_approvals import ASK, outcome, run_then_quote

pytestmark = pytest.mark.anyio


async def test_always_allow_persists_a_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    plugins: tuple[tuple[Any, Any], ...] = (*ASK, (Permissions, {}))
    client = RecordingClient(ALLOW_ALWAYS)
    async with acp_rig(tmp_path, respond=run_then_quote, plugins=plugins, client=client) as r:
        session = await r.new()
        assert await r.say(session, "run printf KEPT") == "end_turn"
        assert outcome(r) == ("completed", "KEPT")
        other = await r.new()
        assert await r.say(other, "run printf KEPT") == "end_turn"
        assert len(client.asked) == 1
    saved = json.loads((tmp_path / ".dsh" / "settings.local.json").read_text())
    assert saved == {"permissions": {"allow": ["Bash(printf KEPT)"]}}
