"""A run whose session lost records says so last and fails (issue 23, item 4)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dsh import Plugin
from dsh.testing import text
from dsh_session import Session, UnsavedRecords
from dsh_stdio_agent import EXIT_FAILED, EXIT_OK
from tests.plugins.stdio_agent.stdio_support import front_rig

pytestmark = pytest.mark.anyio


class Lossy(Plugin):
    """A backend whose last writes of every session failed: 2 records it holds."""

    name = "lossy"

    def setup(self) -> Iterator[Any]:
        yield self.ctx.on("session/flush", self._flush)

    def _flush(self, session: Session, unsaved: list[UnsavedRecords]) -> None:
        unsaved.append(UnsavedRecords(session.id, 2, OSError("No space left on device")))


async def test_lost_records_end_the_run_with_a_line_and_status_1() -> None:
    async with front_rig(text("hello"), text("again"), plugins=((Lossy, None),)) as r:
        assert await r.front.run(prompt="hi", show_session=True) == EXIT_FAILED
        session = r.agent.session.id
        assert r.err.getvalue() == (
            f"session: {session}\n"
            f"[lost] 2 records of session {session} could not be stored: No space left on "
            "device\n"
        )
    # Without a loss the same run succeeds.
    async with front_rig(text("hello")) as r:
        assert await r.front.run(prompt="hi") == EXIT_OK
        assert r.err.getvalue() == ""
