"""The watcher process of :mod:`dsh.lifeline`: it kills what dsh started once dsh is gone.

It runs as ``python -I -S _watcher.py <fd> <armed fd> <token>`` and imports nothing but
the standard library (neither ``dsh`` nor anything it needs), so it starts fast and stays
small. Once it ignores the signals aimed at dsh it writes :data:`ARMED` to ``armed fd`` and
closes it: dsh waits for that line before it starts a command (RFC 0053). Then it reads
lines from the pipe ``fd`` whose only writer is the dsh process: ``+<pgid>`` when a process
group was started, ``-<pgid>`` when it has been reaped. The end of that pipe is the end of
dsh, however it ended; the watcher then sends SIGKILL to every group still listed, and to
every process whose environment holds ``DSH_LIFELINE=<token>`` (what left its group, or was
started just before dsh could list it), and exits.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing would slow the start down
if TYPE_CHECKING:
    import signal
else:  # CPython's C module behind ``signal``, which imports ``enum``: that would make
    # the watcher's start to armed (what the first command waits for) ~70 % longer
    import _signal as signal

__all__ = ["ARMED", "IGNORED", "MARK", "main", "marked", "serve", "sweep"]

#: The environment variable whose value ties a process to one dsh process's watcher.
MARK = "DSH_LIFELINE"

#: Signals the watcher ignores: only the end of its pipe (or SIGKILL) ends it, so a
#: Ctrl-C, a hangup or a ``kill`` aimed at dsh does not take its guard away first.
IGNORED = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT)

#: What the watcher writes once it is armed (:data:`IGNORED` ignored, about to read).
ARMED = b"armed\n"

#: The most sweeps of ``/proc`` after dsh ended (each kills what the previous one missed:
#: processes forked meanwhile).
_SWEEPS = 20


def main(argv: list[str]) -> None:
    """``<fd> <armed fd> <token>``: ignore :data:`IGNORED`, say :data:`ARMED` on ``armed
    fd`` (and close it), then :func:`serve` ``fd``."""
    fd, armed, token = int(argv[0]), int(argv[1]), argv[2]
    for number in IGNORED:
        signal.signal(number, signal.SIG_IGN)
    os.write(armed, ARMED)
    os.close(armed)
    serve(fd, token)


def serve(fd: int, token: str) -> None:
    """Follow the registrations on ``fd`` until its end, then kill what is listed or
    marked with ``token``."""
    groups: set[int] = set()
    pending = b""
    while chunk := os.read(fd, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            pgid = int(line[1:])
            if line.startswith(b"+"):
                groups.add(pgid)
            else:
                groups.discard(pgid)
    os.close(fd)
    for pgid in groups:
        _kill(pgid, group=True)
    for _ in range(_SWEEPS):
        if not sweep(token):
            break


def sweep(token: str) -> int:
    """SIGKILL every process (but this one) whose environment holds
    ``DSH_LIFELINE=<token>``; how many were found."""
    entry = f"\0{MARK}={token}\0".encode()
    found = 0
    for pid in marked(entry):
        found += 1
        _kill(pid, group=False)
    return found


def marked(entry: bytes) -> list[int]:
    """The pids (but this process's) whose ``/proc/<pid>/environ`` holds ``entry``
    (``\\0NAME=value\\0``)."""
    pids = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as file:
                environ = b"\0" + file.read()
        except OSError:  # gone meanwhile, or another user's
            continue
        if entry in environ:
            pids.append(int(name))
    return pids


def _kill(target: int, *, group: bool) -> None:
    # not contextlib.suppress: contextlib imports a dozen modules, at the watcher's start
    try:  # noqa: SIM105
        (os.killpg if group else os.kill)(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":  # pragma: no cover (the watcher process; main is tested)
    main(sys.argv[1:])
