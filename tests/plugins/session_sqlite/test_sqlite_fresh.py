"""Many processes setting up one brand-new database at once: none is answered busy.

Two connections switching a fresh file to WAL at the same moment each hold a shared
lock and want an exclusive one; SQLite answers one of them busy at once (no wait could
end that), which failed a fleet task in about one run of eight. The race is a matter of
microseconds, so the test runs many fresh rounds of forked processes released together.
"""

from __future__ import annotations

import multiprocessing
import traceback
from pathlib import Path
from typing import Any

import pytest

from dsh_session_sqlite import SessionDatabaseError
from dsh_session_sqlite._db import prepare, transaction

ROUNDS = 80
PROCESSES = 12


def _create(paths: list[Path], index: int, start: Any, answers: Any) -> None:
    """In a forked process, for each round: wait for the others, set that round's
    database up and store a session in it; report None or the error."""
    for path in paths:
        start.wait()
        try:
            connection = prepare(path, fsync=False, busy_ms=5000, create=True)
            assert connection is not None
            with transaction(connection):
                connection.execute(
                    "INSERT INTO sessions (id, created_at, meta) VALUES (?, 1.0, '{}')",
                    (f"s{index}",),
                )
            connection.close()
        except BaseException as exc:  # reported to the test, which fails on it
            answers.put("".join(traceback.format_exception_only(exc)))
            continue
        answers.put(None)


def test_concurrent_set_up_of_a_fresh_database_is_never_busy(tmp_path: Path) -> None:
    # The same processes race on a fresh database each round (a barrier starts every
    # round): forking them once keeps the race and spares ROUNDS x PROCESSES forks.
    fork = multiprocessing.get_context("fork")
    paths = [tmp_path / f"round-{round_}" / "sessions.db" for round_ in range(ROUNDS)]
    start = fork.Barrier(PROCESSES)
    answers = fork.Queue()
    children = [
        fork.Process(target=_create, args=(paths, i, start, answers)) for i in range(PROCESSES)
    ]
    for child in children:
        child.start()
    failures: list[str] = []
    for path in paths:
        failures += [a for a in (answers.get(timeout=120) for _ in children) if a is not None]
        connection = prepare(path, fsync=False, busy_ms=5000, create=False)
        assert connection is not None
        count = connection.execute("SELECT count(*) FROM sessions").fetchone()[0]
        connection.close()
        assert failures or count == PROCESSES
    for child in children:
        child.join()
        assert child.exitcode == 0
    assert failures == []


def test_a_set_up_lock_that_cannot_be_made_names_the_database(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    (tmp_path / "sessions.db-locks").write_text("not a folder")
    with pytest.raises(SessionDatabaseError, match="cannot lock session database") as info:
        prepare(path, fsync=False, busy_ms=0, create=True)
    assert info.value.path == str(path)
