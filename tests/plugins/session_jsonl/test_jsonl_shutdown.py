"""What a crash while a session is being created leaves under the root, and how
starting ``session-jsonl`` sweeps it (the shutdown contract itself runs against every
store: ``tests/plugins/session_store/test_store_shutdown.py``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dsh import Context
from dsh_agent_core import AgentCore
from dsh_session_jsonl import JsonlSessions
from dsh_session_jsonl._format import FILE_NAME
from dsh_session_jsonl._sweep import _STALE_SECONDS, _stale, sweep_stale

pytestmark = pytest.mark.anyio


# -- a crash while a session is being created ----------------------------------------------


def stale_temporary(directory: Path) -> Path:
    directory.mkdir(parents=True)
    tmp = directory / f".{FILE_NAME}.0123456789abcdef.tmp"
    tmp.write_text('{"id": "x"}')
    old = time.time() - _STALE_SECONDS - 1
    os.utime(tmp, (old, old))
    return tmp


async def test_a_crash_during_creation_leaves_no_phantom_session(tmp_path: Path) -> None:
    root_dir = tmp_path / "sessions"
    stale = stale_temporary(root_dir / "phantom")
    (root_dir / "empty").mkdir()
    fresh = root_dir / "busy" / f".{FILE_NAME}.fedcba9876543210.tmp"
    fresh.parent.mkdir()
    fresh.write_text("{}")  # young: its creator may still be writing it
    # Listing alone skips directories without a published file.
    async with Context() as root:
        root.plugin(AgentCore, {})
        plugin = root.plugin(JsonlSessions, {"root": str(root_dir)})
        await root.settle()
        assert root.sessions.stored() == []
        assert plugin.state.name == "ACTIVE"
    # Starting the plugin swept what the crash left: the temporary nobody holds, and
    # the directories left empty; the young temporary stays.
    assert not stale.exists()
    assert not (root_dir / "phantom").exists()
    assert not (root_dir / "empty").exists()
    assert fresh.exists()


def test_the_sweep_keeps_a_temporary_whose_creator_holds_it(tmp_path: Path) -> None:
    import fcntl

    tmp = stale_temporary(tmp_path / "s1")
    fd = os.open(tmp, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert sweep_stale(tmp_path, time.time()) == []
    finally:
        os.close(fd)
    assert sweep_stale(tmp_path, time.time()) == [tmp, tmp.parent]
    assert sweep_stale(tmp_path / "missing", time.time()) == []
    assert not _stale(tmp_path / "vanished.tmp", time.time())
