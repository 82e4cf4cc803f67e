"""What the core tests share: a step that blocks until it is cancelled."""

from __future__ import annotations

import anyio


async def wait_for_cancel(started: anyio.Event, log: list[str], note: str) -> None:
    """Set ``started``, then block until cancelled, logging ``note`` on the way out."""
    started.set()
    try:
        await anyio.sleep_forever()
    finally:
        log.append(note)
