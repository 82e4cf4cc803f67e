"""The original session's stored header names the sessions it was rewound into
(``meta.rewound_to``, one entry per rewind; RFC 0038 addendum), on both stores, read
back by load, snapshot and the listing, after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.testing import run_turn
from dsh_session import describe_session
from tests.plugins.checkpoints.ckpt_support import runtime, write_turn
from tests.plugins.checkpoints.test_durable import store

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_the_original_header_names_each_rewound_session(tmp_path: Path, kind: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    replies = [*write_turn("a.txt", "one"), *write_turn("a.txt", "two")]
    async with runtime(workspace, *replies, plugins=store(kind, tmp_path)) as root:
        agent = root.agents.get("main")
        await run_turn(agent, "first")
        await run_turn(agent, "second")
        original = agent.session
        first = await root.checkpoints.rewind(agent, 2)
        assert original.header.meta["rewound_to"] == [{"session": first.session.id, "turn": 2}]
        # The new session names the original only: the link back is not copied into it.
        assert "rewound_to" not in first.session.header.meta
        assert first.session.header.meta["rewound_from"] == {"session": original.id, "turn": 2}
        snapshot = await root.sessions.snapshot(original.id)
        assert snapshot is not None
        assert snapshot.header.meta == original.header.meta
    async with runtime(workspace, plugins=store(kind, tmp_path)) as root:
        # Restarted: a second rewind of the original appends to the list.
        resumed = await root.sessions.resume(original.id)
        assert resumed.header.meta["rewound_to"] == [{"session": first.session.id, "turn": 2}]
        second = await root.checkpoints.rewind(resumed, 1, force=True)
        links = [
            {"session": first.session.id, "turn": 2},
            {"session": second.session.id, "turn": 1},
        ]
        assert resumed.header.meta["rewound_to"] == links
        assert second.session.header.meta["rewound_from"] == {"session": original.id, "turn": 1}
    async with runtime(workspace, plugins=store(kind, tmp_path)) as root:
        loaded = await root.sessions.load(original.id)
        assert loaded.header.meta["rewound_to"] == links
        [listed] = [s for s in root.sessions.stored() if s.id == original.id]
        assert listed.meta["rewound_to"] == links
        assert (
            f"rewound to {first.session.id} (before turn 2), {second.session.id} "
            "(before turn 1)" in describe_session(listed)
        )
        # The rewound session, once stored, names the original.
        renewed = await root.sessions.load(first.session.id)
        assert renewed.header.meta["rewound_from"] == {"session": original.id, "turn": 2}
        assert "rewound_to" not in renewed.header.meta
