"""Helpers of the lifeline tests: a dsh runtime in a process of its own, killed by a
test, a named pipe on which a child says it is ready, and a scan of ``/proc`` for what
it left."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

#: How long a test waits for an event before it fails (never a limit on dsh itself).
PATIENCE = 30.0
ROOT = Path(__file__).parents[2]


def marked(mark: str) -> list[int]:
    """The pids whose environment or command line holds ``mark``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if mark.encode() in environ + cmdline:
            found.append(int(name))
    return found


def ready_pipe(folder: Path) -> Path:
    """A new named pipe in ``folder``: a child writes a line to it once it is ready, and
    :func:`await_line` reads it."""
    pipe = folder / f"ready-{uuid.uuid4().hex}"
    os.mkfifo(pipe)
    return pipe


def await_line(pipe: Path, pid: int | None = None) -> bytes:
    """What the first writer of the named pipe ``pipe`` wrote, once it wrote a line or
    closed the pipe; ``b""`` when process ``pid`` ended first. It blocks (for at most
    :data:`PATIENCE`) on the pipe and on ``pid``'s pidfd: on the events themselves."""
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # at once, with or without a writer
    watched = [fd] if pid is None else [fd, os.pidfd_open(pid)]
    try:
        said = b""
        deadline = time.monotonic() + PATIENCE
        while not said.endswith(b"\n"):
            rest = deadline - time.monotonic()
            assert rest > 0, f"nothing said on {pipe.name}"
            ready, _, _ = select.select(watched, [], [], rest)
            if fd in ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break  # every writer closed it
                said += chunk
            elif ready:  # the process ended: what it wrote before is in the pipe
                with contextlib.suppress(BlockingIOError):
                    said += os.read(fd, 4096)
                break
        return said
    finally:
        for watched_fd in watched:
            os.close(watched_fd)


def environ_of(pid: int) -> list[bytes]:
    """The environment entries of process ``pid``, which runs its program (the file is
    empty until the new program's stack is set up, a moment after its exec: ask once
    the process said it runs)."""
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


def await_exits(pids: list[int], timeout: float) -> None:
    """Wait (for at most ``timeout`` seconds) until each of ``pids`` has exited: the
    kernel makes a process's pidfd readable then, so this waits on the event itself."""
    fds = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            fds.append(os.pidfd_open(pid))
    try:
        pending = set(fds)
        deadline = time.monotonic() + timeout
        while pending and (rest := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(list(pending), [], [], rest)
            pending.difference_update(ready)
    finally:
        for fd in fds:
            os.close(fd)


def survivors(victim: subprocess.Popen[bytes], mark: str) -> list[int]:
    """Wait until the processes marked ``mark`` are gone (for at most
    :data:`PATIENCE`); those still there then (killed afterwards, not to leak)."""
    victim.wait()
    deadline = time.monotonic() + PATIENCE
    while (left := marked(mark)) and time.monotonic() < deadline:
        await_exits(left, deadline - time.monotonic())
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def start_victim(backend: str, what: str, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Run ``tests.core.lifeline_victim`` and wait until it says that what it starts
    runs; the process and its mark."""
    mark = f"lifeline-{uuid.uuid4().hex}"
    ready = ready_pipe(tmp_path)
    victim = subprocess.Popen(
        [sys.executable, "-m", "tests.core.lifeline_victim", backend, what, mark, str(ready)],
        cwd=ROOT,
    )
    assert await_line(ready, victim.pid), "the victim ended before it was ready"
    return victim, mark


def kill_mid_call(backend: str, what: str, tmp_path: Path) -> list[int]:
    """Start a victim doing ``what``, SIGKILL it once everything runs, and return what
    survived it."""
    victim, mark = start_victim(backend, what, tmp_path)
    assert marked(mark), "nothing marked was running"
    victim.kill()
    return survivors(victim, mark)
