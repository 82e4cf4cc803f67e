"""Reading standard input without blocking the event loop, and without holding up exit."""

from __future__ import annotations

import sys
import threading
from contextlib import suppress

import anyio
from anyio import from_thread
from anyio.lowlevel import current_token

__all__ = ["read_stdin_line"]


async def read_stdin_line() -> str:
    """The next line of ``sys.stdin`` (with its newline), or ``""`` at end of input.

    The blocking ``readline`` runs in a daemon thread of its own. A worker thread of
    ``anyio.to_thread`` would do the same while the read completes, but one abandoned
    on cancellation (Ctrl-C at the prompt) is not a daemon on asyncio and would keep
    the process alive until the user pressed Enter. A read that is abandoned ends
    when its line arrives or the process exits; its line is dropped. A closed or
    unreadable stdin is the end of input.
    """
    stdin = sys.stdin
    if stdin is None:  # started with stdin closed (`dsh run FILE <&-`)
        return ""
    token = current_token()
    done = anyio.Event()
    lines: list[str] = []

    def read() -> None:
        try:
            lines.append(stdin.readline())
        except (OSError, ValueError):  # stdin closed or unreadable: end of input
            lines.append("")
        with suppress(anyio.RunFinishedError):  # the caller's event loop has ended
            from_thread.run_sync(done.set, token=token)

    threading.Thread(target=read, name="dsh-stdin-reader", daemon=True).start()
    await done.wait()
    return lines[0]
