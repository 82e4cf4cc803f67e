"""The approval question in a real terminal: ``dsh run`` on a pty answers with one
keypress, and Ctrl-C at the question means no (the turn goes on)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.plugins.stdio_agent.stdio_support import shell_deployment

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX terminals")

TIMEOUT = 60.0  # per wait: fails the test instead of hanging it


class Terminal:
    """The master side of a pty that ``dsh run`` has as stdin, stdout and stderr."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seen = b""
        self.mark = 0  # what expect() has consumed

    def expect(self, marker: bytes) -> bytes:
        """Read until ``marker`` appears after the last match; return what came
        before it (from the last match on)."""
        deadline = time.monotonic() + TIMEOUT
        while (found := self.seen.find(marker, self.mark)) < 0:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {marker!r}; the terminal shows {self.seen!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # the other side closed (EIO)
                    chunk = b""
                assert chunk, f"the terminal closed before {marker!r}: {self.seen!r}"
                self.seen += chunk
        before = self.seen[self.mark : found]
        self.mark = found + len(marker)
        return before

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)


def test_one_key_answers_and_ctrl_c_means_no(tmp_path: Path) -> None:
    path = shell_deployment(tmp_path)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh", "run", str(path)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=tmp_path,
        start_new_session=True,
    )
    os.close(slave)
    term = Terminal(master)
    try:
        term.expect(b'talking to agent "main"')
        term.expect(b"> ")
        term.type(b"go\n")
        term.expect(b"Allow bash: printf ALLOWED? [y/N] ")
        term.type(b"y")  # one key, no Enter
        assert term.expect(b"result: ALLOWED").count(b"[tool] bash -> ALLOWED") == 1
        term.expect(b"> ")
        term.type(b"again\n")
        term.expect(b"Allow bash: printf ALLOWED? [y/N] ")
        term.type(b"\x03")  # Ctrl-C at the question: no
        declined = term.expect(b"result: Error: the user declined: bash: printf ALLOWED")
        assert b"[tool] bash failed (APPROVAL_DENIED)" in declined
        term.expect(b"> ")
        term.type(b"/exit\n")
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
