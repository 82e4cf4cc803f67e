"""A record of a type declared durable (``compaction/checkpoint``) is on disk when
``append`` returns: a process SIGKILLed right after writing one keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh import Context
from dsh_session import DURABLE_EVENTS, META_EVENT, Sessions
from tests.plugins.session_store.store_support import Store, sigkill_once_it_says
from tests.support import echo_deployment

#: What is durable before any declaration: the built-in commit types and session/meta.
BASE = DURABLE_EVENTS | {META_EVENT}

DRIVER = """\
import sys

import anyio

import dsh


async def main(path):
    async with dsh.Context() as root:
        await dsh.load_deployment(path, root)
        session = root.sessions.create("ckpt")
        session.append("turn/start", {"turn": 1})
        session.append("compaction/checkpoint", {"summary": "so far", "first_kept_seq": 0})
        print("WRITTEN", flush=True)
        sys.stdin.readline()  # never answered: the test kills the process here


anyio.run(main, sys.argv[1])
"""


def test_a_checkpoint_survives_a_sigkill_right_after_it_is_written(
    store: Store, tmp_path: Path
) -> None:
    compaction = "- {id: compaction, name: compaction, config: {context_window: 100000}}"
    yml = echo_deployment(
        tmp_path, "{model: echo-mock}", f"{store.yaml_entry()}\n        {compaction}"
    )
    sigkill_once_it_says(tmp_path, DRIVER, yml, "WRITTEN", stdin=True)
    assert store.exists("ckpt")
    assert [r["type"] for r in store.records("ckpt")] == ["turn/start", "compaction/checkpoint"]


@pytest.mark.anyio
async def test_a_type_is_durable_while_a_durable_declaration_holds() -> None:
    async with Context() as root:
        await root.plugin(Sessions)
        durable = root.sessions.durable_types()
        assert set(durable) == BASE  # the store's own session/meta is durable too
        plain = root.sessions.declare_event_types("x/plain")
        first = root.sessions.declare_event_types("x/kept", "x/also", durable=True)
        second = root.sessions.declare_event_types("x/kept", durable=True)
        assert set(durable) == BASE | {"x/kept", "x/also"}  # a live view
        first()
        assert set(durable) == BASE | {"x/kept"}
        assert "x/also" not in root.sessions.event_types()
        second()
        plain()
        assert set(durable) == BASE
        assert root.sessions.event_types().isdisjoint({"x/plain", "x/kept"})
