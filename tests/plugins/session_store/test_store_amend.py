"""Amending a stored header (``sessions.amend_meta``, RFC 0038 addendum): a durable
``session/meta`` record that every reader of the header folds into its meta, on each
store, across a restart and a SIGKILL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_session import (
    META_EVENT,
    OpaqueEvent,
    SessionError,
    SessionEvent,
    SessionHeader,
    check_event,
    fold_meta,
)
from tests.plugins.session_store.store_support import Broken, Store, sigkill_once_it_says
from tests.support import echo_deployment

REWOUND = [{"session": "n1", "turn": 2}]


@pytest.mark.anyio
async def test_an_amended_header_is_read_back_everywhere_after_a_restart(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        session = sessions.create("s1", meta={"agent": "main"})
        session.append("turn/start", {"turn": 1})
        assert sessions.amend_meta("s1", {"rewound_to": REWOUND}).meta["rewound_to"] == REWOUND
        twice = [*REWOUND, {"session": "n2", "turn": 1}]
        header = sessions.amend_meta("s1", {"rewound_to": twice})
        assert session.header is header
        assert header.meta == {"agent": "main", "rewound_to": twice}
        # Committed before amend_meta returns: a reader sees it while the session is live.
        snapshot = await sessions.snapshot("s1")
        assert snapshot is not None
        assert snapshot.header.meta == header.meta
        assert [s.meta for s in sessions.stored()] == [header.meta]
        assert [s.meta for s in store.summaries()] == [header.meta]
    # The header as first written stays; the amendments follow it as records.
    assert store.header("s1")["meta"] == {"agent": "main"}
    amendments = [r for r in store.records("s1") if r["type"] == META_EVENT]
    assert [r["data"] for r in amendments] == [
        {"session": "s1", "meta": {"rewound_to": REWOUND}},
        {"session": "s1", "meta": {"rewound_to": twice}},
    ]
    # A reader that does not know the type (an older dsh) keeps the record as history.
    assert isinstance(check_event(amendments[0]), OpaqueEvent)
    async with store.runtime() as (_, sessions, _):
        loaded = await sessions.load("s1")
        assert loaded.header.meta == header.meta
    async with store.runtime() as (_, sessions, _):
        resumed = await sessions.resume("s1")
        assert resumed.header.meta == header.meta
        assert [s.meta for s in sessions.stored()] == [header.meta]


@pytest.mark.anyio
async def test_a_torn_amendment_leaves_the_header_as_it_was(store: Store) -> None:
    store.store("s1", [{"seq": 0, "type": "turn/start", "time": 2.0, "data": {"turn": 1}}])
    store.append_raw(
        "s1",
        {"seq": 1, "type": META_EVENT, "time": 3.0, "data": {"session": "s1", "meta": {"a": 1}}},
    )
    store.store(
        "s2",
        [
            {"seq": 0, "type": "turn/start", "time": 2.0, "data": {"turn": 1}},
            Broken(1, META_EVENT),
        ],
    )
    async with store.runtime() as (_, sessions, _):
        assert {s.id: dict(s.meta) for s in sessions.stored()} == {"s1": {"a": 1}, "s2": {}}
        assert (await sessions.load("s1")).header.meta == {"a": 1}
        assert (await sessions.load("s2")).header.meta == {}


@pytest.mark.anyio
async def test_amend_meta_refusals(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        with pytest.raises(SessionError, match='session "s1" is not live in this store'):
            sessions.amend_meta("s1", {"a": 1})
        session = sessions.create("s1")
        refused: list[tuple[Any, str]] = [
            ({}, "must be a non-empty mapping"),
            ([("a", 1)], "must be a non-empty mapping"),
            ({1: "a"}, "has a key that is not a string: 1"),
            ({"a": object()}, "is not JSON data"),
            ({"a": float("nan")}, "is not JSON data"),
        ]
        for patch, problem in refused:
            with pytest.raises(SessionError, match=problem):
                sessions.amend_meta("s1", patch)
        assert len(session.events) == 0
        assert session.header.meta == {}


def test_a_patch_amends_only_the_header_it_names() -> None:
    header = SessionHeader("s2", 1.0, None, {"kept": True})

    def amendment(seq: int, data: dict[str, Any]) -> SessionEvent:
        return SessionEvent(seq, META_EVENT, 2.0, data)

    records = [
        amendment(0, {"session": "s1", "meta": {"rewound_to": REWOUND}}),  # a seed's copy
        amendment(1, {"session": "s2", "meta": "junk"}),
        SessionEvent(2, "turn/start", 2.0, {"turn": 1}),
        "not an event",
    ]
    assert fold_meta(header, records) is header
    folded = fold_meta(header, [*records, amendment(3, {"session": "s2", "meta": {"a": 1}})])
    assert folded.meta == {"kept": True, "a": 1}


DRIVER = """\
import sys

import anyio

import dsh


async def main(path):
    async with dsh.Context() as root:
        await dsh.load_deployment(path, root)
        session = root.sessions.create("s1", meta={"n": 0})
        session.append("turn/start", {"turn": 1})
        n = 0
        while True:  # amended until the test kills the process, mid-amendment or not
            n += 1
            root.sessions.amend_meta("s1", {"n": n, "pad": "x" * 4096})
            if n == 1:
                print("READY", flush=True)


anyio.run(main, sys.argv[1])
"""


def kill_while_amending(store: Store, tmp_path: Path) -> None:
    """Run :data:`DRIVER` on ``store`` and SIGKILL it once it has amended once."""
    yml = echo_deployment(tmp_path, "{model: echo-mock}", store.yaml_entry())
    sigkill_once_it_says(tmp_path, DRIVER, yml, "READY")


@pytest.mark.anyio
async def test_a_sigkill_while_amending_leaves_the_old_or_the_new_header(
    store: Store, tmp_path: Path
) -> None:
    kill_while_amending(store, tmp_path)
    [listed] = store.summaries()
    assert listed.error is None
    async with store.runtime() as (_, sessions, _):
        loaded = await sessions.load("s1")
    committed = [r["data"]["meta"]["n"] for r in store.records("s1") if r["type"] == META_EVENT]
    # Every amendment committed is whole: the header is the last one's.
    assert committed == list(range(1, len(committed) + 1))
    assert loaded.header.meta["n"] == committed[-1]
    assert listed.meta["n"] == loaded.header.meta["n"]
    assert json.loads(json.dumps(dict(loaded.header.meta)))  # plain JSON data
