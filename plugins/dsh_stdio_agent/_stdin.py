"""Reading standard input without blocking the event loop, and without holding up exit."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import TypeVar

import anyio
from anyio.lowlevel import current_token

__all__ = ["read_stdin_key", "read_stdin_line"]

T = TypeVar("T")


async def _in_daemon_thread(read: Callable[[], T], *, empty: T) -> T:
    """``read()`` in a daemon thread of its own; ``empty`` when it raises ``OSError`` or
    ``ValueError`` (stdin closed or unreadable).

    A worker thread of ``anyio.to_thread`` would do the same while the read completes,
    but one abandoned on cancellation (Ctrl-C at the prompt) is not a daemon on asyncio
    and would keep the process alive until the user pressed Enter. A read that is
    abandoned ends when its input arrives or the process exits; the input is dropped.
    """
    from anyio import from_thread  # only a read from stdin needs it (docs/rfc/0055)

    token = current_token()
    done = anyio.Event()
    found: list[T] = []

    def run() -> None:
        try:
            found.append(read())
        except (OSError, ValueError):  # stdin closed or unreadable: end of input
            found.append(empty)
        with suppress(anyio.RunFinishedError):  # the caller's event loop has ended
            from_thread.run_sync(done.set, token=token)

    threading.Thread(target=run, name="dsh-stdin-reader", daemon=True).start()
    await done.wait()
    return found[0]


async def read_stdin_line() -> str:
    """The next line of ``sys.stdin`` (with its newline), or ``""`` at end of input.

    The blocking ``readline`` runs in a daemon thread (see :func:`_in_daemon_thread`).
    A closed or unreadable stdin is the end of input.
    """
    stdin = sys.stdin
    if stdin is None:  # started with stdin closed (`dsh run FILE <&-`)
        return ""
    return await _in_daemon_thread(stdin.readline, empty="")


def _nothing() -> None:
    return None


async def read_stdin_key(ready: Callable[[], object] = _nothing) -> str:
    """One keypress from the terminal on ``sys.stdin`` (``""`` at end of input).

    The terminal is switched to reading single keys without echo and without signal
    keys for the read, so Ctrl-C arrives as the character ``"\\x03"`` rather than as
    SIGINT, and restored afterwards; ``ready()`` is called once it reads keys (show the
    question then, so no key typed after it can be taken as a signal). Only for a
    stdin that is a terminal.
    """
    stdin = sys.stdin
    if stdin is None:
        return ""
    import termios  # only a terminal's approval question needs it (docs/rfc/0050)

    fd = stdin.fileno()
    saved = termios.tcgetattr(fd)
    keys = termios.tcgetattr(fd)
    keys[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG)
    keys[6][termios.VMIN] = 1
    keys[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSANOW, keys)
    try:
        ready()
        data = await _in_daemon_thread(lambda: os.read(fd, 32), empty=b"")
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
    return data.decode("utf-8", "replace")
