"""Writer leases of the SQLite store: each session's epoch in the ``leases`` table.

Taking a lease raises the session's epoch in one write transaction; a leased writer
reads the epoch inside each commit's transaction and writes nothing when it is no
longer its own. SQLite serialises write transactions, so the check and the write are
one step. (That holds for the processes of one machine: SQLite's locks are not to be
trusted on a network file system, so one database file must not be shared across
machines.)

The table is made by the first lease (``CREATE TABLE IF NOT EXISTS``), so a database
written before leases existed keeps its schema version.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dsh_session import Lease, SessionWriteError

from ._db import prepare, transaction

__all__ = ["current_epoch", "take_lease"]

_TABLE = "CREATE TABLE IF NOT EXISTS leases (id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)"


def take_lease(path: Path, session_id: str, *, fsync: bool, busy_ms: int) -> Lease:
    """Raise the epoch of session ``session_id`` in the database at ``path`` (made when
    missing) by one, on a connection of its own (it runs in a worker thread). Raises
    :class:`SessionDatabaseError` for a database that cannot be used and
    :class:`SessionWriteError` when the transaction fails."""
    connection = prepare(path, fsync=fsync, busy_ms=busy_ms, create=True)
    assert connection is not None  # created when missing
    try:
        with transaction(connection):
            connection.execute(_TABLE)
            connection.execute(
                "INSERT INTO leases (id, epoch) VALUES (?, 1) "
                "ON CONFLICT (id) DO UPDATE SET epoch = epoch + 1",
                (session_id,),
            )
            epoch = current_epoch(connection, session_id)
            stored = connection.execute(
                "SELECT 1 FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
    except sqlite3.Error as exc:
        raise SessionWriteError(
            f'cannot take the lease of session "{session_id}" in {path}: {exc}'
        ) from exc
    finally:
        connection.close()
    assert epoch is not None  # just written
    return Lease(session_id, epoch, stored is not None)


def current_epoch(connection: sqlite3.Connection, session_id: str) -> int | None:
    """The stored epoch of ``session_id`` (None: no lease was ever taken)."""
    row = connection.execute("SELECT epoch FROM leases WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else int(row[0])
