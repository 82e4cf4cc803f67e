"""session-jsonl's lease file: where the epoch lives, and what a lease does when the
file cannot be used."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Any

import pytest

from dsh_session import SessionReadError, SessionWriteError
from dsh_session_jsonl import FILE_NAME
from tests.plugins.session_jsonl.jsonl_support import jsonl_runtime
from tests.plugins.session_store.store_support import turn

pytestmark = pytest.mark.anyio


async def test_the_epoch_is_a_number_in_the_session_directory(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path, fsync=False) as (_, sessions, plugin):
        await sessions.lease("s")
        assert (tmp_path / "s" / "lease").read_text() == "1\n"
        assert repr(plugin._leases["s"]) == (
            f"<LeaseFile {tmp_path / 's' / 'lease'} (Lease(session_id='s', epoch=1, "
            "stored=False, fenced=None))>"
        )
        turn(sessions.create(id="s"), 1)
        assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["lease", FILE_NAME]
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        for epoch in range(2, 12):
            assert (await sessions.lease("s")).epoch == epoch
        assert (tmp_path / "s" / "lease").read_text() == "11\n"
        assert plugin.list_sessions()[0].id == "s"  # the lease file is not a session


async def test_a_lease_file_that_holds_no_number_is_reported(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "lease").write_text("seven\n")
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        with pytest.raises(SessionReadError, match="holds 'seven', not an epoch"):
            await sessions.lease("s")
        assert plugin._leases == {}


async def test_a_lease_where_no_directory_can_be_made_is_reported(tmp_path: Path) -> None:
    (tmp_path / "s").write_text("not a directory")
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(SessionWriteError, match="cannot open the lease file"):
            await sessions.lease("s")


def failing(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, code: int) -> None:
    def fail(*args: Any) -> Any:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(module, name, fail)


@pytest.mark.parametrize(
    ("module", "name", "problem"),
    [
        (os, "pread", "cannot read the lease file"),
        (os, "pwrite", "cannot write the lease file"),
        (fcntl, "flock", "cannot lock the lease file"),
    ],
)
async def test_a_lease_file_that_fails_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: Any, name: str, problem: str
) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        failing(monkeypatch, module, name, errno.ENOLCK if name == "flock" else errno.EIO)
        with pytest.raises((SessionReadError, SessionWriteError), match=problem):
            await sessions.lease("s")


async def test_a_snapshot_of_an_unreadable_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "s" / FILE_NAME).mkdir(parents=True)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(SessionReadError, match="cannot read session file"):
            await sessions.snapshot("s")
