"""Rewind: the files back to before turn N, a new session seeded with the events before
it, both sessions naming each other, and the conversation continuing there."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.testing import run_turn, text
from dsh_checkpoints import CheckpointConflictError, CheckpointError
from tests.plugins.checkpoints.ckpt_support import runtime, write_turn

pytestmark = pytest.mark.anyio


async def test_rewind_restores_files_and_continues_in_a_new_session(tmp_path: Path) -> None:
    replies = [
        *write_turn("a.txt", "one"),
        *write_turn("a.txt", "two"),
        *write_turn("b/c.txt", "three"),
        text("continued"),
    ]
    async with runtime(tmp_path, *replies) as root:
        agent = root.agents.get("main")
        for message in ("first", "second", "third"):
            await run_turn(agent, message)
        listed = root.checkpoints.turns(agent)
        assert [(t.turn, t.title, len(t.files)) for t in listed] == [
            (1, "first", 1),
            (2, "second", 1),
            (3, "third", 1),
        ]
        original = agent.session
        done = await root.checkpoints.rewind(agent, 2)
        assert (tmp_path / "a.txt").read_text() == "one"
        assert not (tmp_path / "b").exists()
        assert sorted(done.restore.restored) == [str(tmp_path / "a.txt"), str(tmp_path / "b/c.txt")]
        new = done.session
        assert new.id != original.id
        assert new.header.meta["rewound_from"] == {"session": original.id, "turn": 2}
        restores = [e.data for e in original.events if e.type == "checkpoint/restore"]
        assert restores[-1]["rewound_to"] == new.id
        start = next(
            e.seq for e in original.events if e.type == "turn/start" and e.data["turn"] == 2
        )
        assert list(new.events) == list(original.events[:start])
        assert root.sessions.get(original.id) is None  # the old agent is gone with it
        renewed = root.agents.get("main")
        assert renewed is done.agent
        assert renewed.session is new
        assert await run_turn(renewed, "again") == {"kind": "completed"}
        assert new.last_turn() == 2
        users = [
            e.data["message"]["content"][0]["text"] for e in new.events if e.type == "user/message"
        ]
        assert users == ["first", "again"]


async def test_rewind_refuses_unknown_turns_running_agents_and_conflicts(tmp_path: Path) -> None:
    async with runtime(tmp_path, *write_turn("a.txt", "one")) as root:
        agent = root.agents.get("main")
        with pytest.raises(CheckpointError, match="has no turns to rewind"):
            await root.checkpoints.rewind(agent, 1)
        await run_turn(agent, "first")
        with pytest.raises(CheckpointError, match=r"has no turn 5 \(its turns are 1 to 1\)"):
            await root.checkpoints.rewind(agent, 5)
        (tmp_path / "a.txt").write_text("by hand")
        with pytest.raises(CheckpointConflictError):
            await root.checkpoints.rewind(agent, 1)
        assert root.agents.get("main") is agent
        done = await root.checkpoints.rewind(agent.session, 1, force=True)
        assert done.agent is None
        assert not (tmp_path / "a.txt").exists()


async def test_a_running_agent_is_not_rewound(tmp_path: Path) -> None:
    class Running:
        status = "running"
        id = "main"

        def __init__(self, session: object) -> None:
            self.session = session

    async with runtime(tmp_path) as root:
        session = root.agents.get("main").session
        with pytest.raises(CheckpointError, match='agent "main" is running a turn'):
            await root.checkpoints.rewind(Running(session), 1)
