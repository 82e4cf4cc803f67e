"""Lifelines: the processes dsh starts die when dsh dies, however it dies.

Every process group dsh starts (a bash command, a background job, an MCP stdio server, a
hook) is listed with one small watcher process per dsh process, started on first use
(dsh waits until it says it is armed before it starts a command). The watcher reads a
pipe whose write end only this process holds (close-on-exec, and closed in a forked
child); when that pipe ends (dsh exited, crashed or was sent SIGKILL, from whatever
thread) it sends SIGKILL to every group still listed, and to every process whose
environment still carries this process's mark (``DSH_LIFELINE=<token>``: what left
its group with ``setsid``, or was started a moment before dsh could list it). See
``docs/rfc/0024-lifelines.md`` and ``docs/rfc/0053-armed-watcher.md``.

:func:`open_process` starts a watched process, :func:`reap` waits for it and drops it
from the list; :data:`LIFELINE` is this process's lifeline, for a caller that starts its
processes some other way (:meth:`Lifeline.mark` its environment, :meth:`Lifeline.watch`
its group, :meth:`Lifeline.release` it once reaped).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import anyio
from anyio.abc import Process

from ._watcher import ARMED, MARK

__all__ = ["LIFELINE", "MARK", "Lifeline", "open_process", "reap"]

_WATCHER = str(Path(__file__).with_name("_watcher.py"))


class Lifeline:
    """The list of this process's process groups, kept by a watcher process.

    Thread-safe. The watcher starts on first use (or :meth:`start`); if it is killed, the
    next :meth:`start` or registration starts another and tells it every group. A forked
    child gets a lifeline of its own (and drops the parent's pipe, so the parent's end is
    still seen).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._fd: int | None = None
        self._watcher: subprocess.Popen[bytes] | None = None
        self.token = _new_token()
        os.register_at_fork(after_in_child=self._forget)

    def __repr__(self) -> str:
        return f"<Lifeline {self.token} watching {len(self._groups)} group(s)>"

    @property
    def watcher_pid(self) -> int | None:
        """The watcher's pid (None before it has started)."""
        watcher = self._watcher
        return None if watcher is None else watcher.pid

    @property
    def groups(self) -> frozenset[int]:
        """The process groups listed now."""
        return frozenset(self._groups)

    def mark(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """``env`` (default: this process's environment) with this lifeline's mark."""
        marked = dict(os.environ if env is None else env)
        marked[MARK] = self.token
        return marked

    def start(self) -> None:
        """Start the watcher unless it runs (one that died is replaced and told every
        group), and return once it is armed: from then on, what this process starts
        dies with it. Raises ``OSError`` when it cannot start or ends before it is
        armed."""
        with self._lock:
            watcher = self._watcher
            if self._fd is None or watcher is None or watcher.poll() is not None:
                self._spawn()

    def watch(self, pgid: int) -> None:
        """List the process group ``pgid``: it is killed if this process dies first."""
        with self._lock:
            self._groups.add(pgid)
            self._send(f"+{pgid}\n")

    def release(self, pgid: int) -> None:
        """Drop ``pgid`` from the list (its leader has been reaped)."""
        with self._lock:
            self._groups.discard(pgid)
            self._send(f"-{pgid}\n")

    def _send(self, line: str) -> None:
        if self._fd is not None:
            try:
                os.write(self._fd, line.encode())
                return
            except BrokenPipeError:  # the watcher was killed: a new one is told every group
                pass
        self._spawn()

    def _spawn(self) -> None:
        """Start a watcher, wait until it says it is armed, and tell it every group."""
        self._close()
        read, write = os.pipe()  # both close-on-exec: no other child inherits them
        announced, armed = os.pipe()  # the watcher's announcement: ARMED, then its end
        env = {name: value for name, value in os.environ.items() if name != MARK}
        try:
            self._watcher = subprocess.Popen(
                [sys.executable, "-I", "-S", _WATCHER, str(read), str(armed), self.token],
                pass_fds=(read, armed),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            os.close(write)
            os.close(announced)
            raise OSError(
                exc.errno, f"cannot start the lifeline watcher ({sys.executable}): {exc.strerror}"
            ) from exc
        finally:
            os.close(read)
            os.close(armed)
        self._fd = write
        try:
            said = os.read(announced, len(ARMED))  # blocks until ARMED or the watcher's end
        finally:
            os.close(announced)
        if said != ARMED:
            self._fail(self._watcher)
        os.write(write, "".join(f"+{pgid}\n" for pgid in self._groups).encode())

    def _fail(self, watcher: subprocess.Popen[bytes]) -> NoReturn:
        self._close()
        watcher.kill()  # it has ended (or, not our watcher, is ended here)
        status = watcher.wait()
        self._watcher = None
        raise OSError(
            errno.EPIPE,
            f"the lifeline watcher ({sys.executable}) ended before it was armed "
            f"(exit status {status})",
        )

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._watcher is not None:
            self._watcher.poll()  # reap it if it died

    def _forget(self) -> None:
        """After a fork, in the child: the parent's groups and watcher are not its own."""
        self._lock = threading.Lock()
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._watcher = None
        self._groups = set()
        self.token = _new_token()


def _new_token() -> str:
    return f"{os.getpid()}-{secrets.token_hex(8)}"


#: This process's lifeline.
LIFELINE = Lifeline()


async def open_process(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
    pass_fds: Sequence[int] = (),
    **options: Any,
) -> Process:
    """``anyio.open_process(command, ...)`` as the leader of a new session and process
    group, its environment (``env``, default this process's) marked, its group watched.
    ``preexec`` runs in the child between fork and exec, after the new session is made
    (a sandbox's step); ``pass_fds`` stay open in the child. End it with :func:`reap`
    once it has exited. The watcher is armed before the process starts (:meth:`Lifeline.start`).
    Raises ``OSError`` when it (or the watcher) cannot start, or when ``preexec`` raised
    in the child."""
    LIFELINE.start()
    marked = LIFELINE.mark(env)
    if preexec is None:
        process = await anyio.open_process(
            command, env=marked, start_new_session=True, pass_fds=pass_fds, **options
        )
    else:
        process = await _open_with_preexec(command, marked, preexec, pass_fds, options)
    try:
        LIFELINE.watch(process.pid)
    except BaseException:
        _kill_group(process.pid)
        with anyio.CancelScope(shield=True):
            await process.aclose()
        raise
    return process


async def _open_with_preexec(
    command: Sequence[str],
    env: dict[str, str],
    preexec: Callable[[], None],
    pass_fds: Sequence[int],
    options: dict[str, Any],
) -> Process:
    """What ``anyio.open_process`` does, with ``preexec_fn``: anyio's function has no
    such option, but each backend hands its options to ``subprocess.Popen``."""
    from anyio._core._eventloop import get_async_backend

    streams = {name: options.pop(name, subprocess.PIPE) for name in ("stdin", "stdout", "stderr")}
    try:
        process: Process = await get_async_backend().open_process(
            list(command),
            **streams,
            env=env,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            preexec_fn=preexec,
            **options,
        )
    except subprocess.SubprocessError as exc:  # raised by Popen when preexec_fn raised
        raise OSError(
            errno.EPERM, f"the pre-exec step of {command[0]!r} failed in the child: {exc}"
        ) from exc
    return process


async def reap(process: Process) -> None:
    """Wait (shielded) until ``process`` has exited, close its streams, and drop its
    group from the lifeline. It does not stop the process: end it first."""
    with anyio.CancelScope(shield=True):
        await process.aclose()
    LIFELINE.release(process.pid)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
