"""The ``bash-local`` executor: ``bash -c`` in a process group of its own."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, Process

from dsh import InFlight
from dsh.lifeline import open_process, reap
from dsh_bash import (
    BashRequest,
    BashResult,
    BashRun,
    BashSpawnError,
    BashUnavailableError,
    SpillFolder,
    StreamCapture,
    signal_name,
)

from ._config import LocalBashConfig
from ._sandbox import Confinement
from ._scrub import Scrub

__all__ = ["LocalExecutor"]

#: Always set, whatever the environment says: no colours, no pager, a dumb terminal.
FIXED_ENV = {"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}


class LocalExecutor:
    """Runs each request as ``<shell> -c <command>`` on this machine.

    The shell leads a new session and process group (watched by :mod:`dsh.lifeline`:
    killed if this process dies first), reads ``/dev/null`` and writes to two pipes;
    stopping it (timeout, cancellation, :meth:`stop_all`) sends SIGTERM to the whole
    group, then SIGKILL after the grace. When the shell exits, whatever it left running
    in its group is killed too.

    With a ``sandbox`` service (``config.sandbox`` not ``off``), each command that is
    not ``unsandboxed`` starts as the :class:`~dsh_sandbox.Launch` the service gives
    for its policy says (an argv prefix, a step before exec, descriptors to pass on).
    """

    def __init__(self, config: LocalBashConfig, sandbox: Any = None) -> None:
        self.config = config
        #: The sandbox commands run in (None: none).
        self.confinement = None if sandbox is None else Confinement(config, sandbox)
        self.spill = SpillFolder(config.spill_dir)
        self.inflight = InFlight()
        self._scrub = Scrub(config.scrub_env, urls=config.scrub_url_passwords)
        self._grace = config.kill_grace_ms / 1000
        self._stops: set[anyio.CancelScope] = set()

    def __repr__(self) -> str:
        return f"<LocalExecutor {self.config.shell!r}>"

    @property
    def max_timeout_ms(self) -> int:
        return self.config.max_timeout_ms

    def environment(self, request: BashRequest) -> dict[str, str]:
        """The environment of ``request``'s command: this process's, without the
        secrets (see :class:`~dsh_bash_local._scrub.Scrub`), plus the config's ``env``, the
        request's ``env``, the fixed variables and ``DSH_SESSION_ID``. (The lifeline
        adds its mark when the command starts.)"""
        secret = self._scrub.secret
        env = {name: value for name, value in os.environ.items() if not secret(name, value)}
        env.pop("DSH_SESSION_ID", None)
        env.update(self.config.env)
        env.update(request.env)
        env.update(FIXED_ENV)
        if request.session_id is not None:
            env["DSH_SESSION_ID"] = request.session_id
        return env

    async def run(self, request: BashRequest) -> BashResult:
        """Run ``request``; see :class:`dsh_bash.BashExecutor`. Raises
        :class:`~dsh_bash.BashSpawnError` when the shell cannot start and
        :class:`~dsh_bash.BashUnavailableError` when :meth:`stop_all` stopped it."""
        stop = anyio.CancelScope()
        self._stops.add(stop)
        try:
            with self.inflight:
                with stop:
                    return await self._run(request)
                raise BashUnavailableError(
                    "the bash executor was unloaded while the command ran (it was killed)"
                )
        finally:
            self._stops.discard(stop)

    async def stop_all(self) -> None:
        """Kill every running command (their callers get ``BashUnavailableError``) and
        wait until they have ended."""
        for stop in self._stops:
            stop.cancel()
        await self.inflight.idle()

    async def _run(self, request: BashRequest) -> BashResult:
        config = self.config
        timeout = config.default_timeout_ms if request.timeout_ms is None else request.timeout_ms
        cwd = request.cwd
        argv = [config.shell, "-c", request.command]
        preexec: Callable[[], None] | None = None
        pass_fds: tuple[int, ...] = ()
        confinement = self.confinement
        if confinement is not None and not request.unsandboxed:
            launch = await confinement.launch(request)
            argv, preexec, pass_fds = launch.argv(argv), launch.preexec, launch.pass_fds
        try:
            # Shielded: a cancellation while the process is being made would leave it
            # (and whatever it starts) running where nothing kills its group; it is
            # delivered at the first checkpoint below instead.
            with anyio.CancelScope(shield=True):
                process = await open_process(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=self.environment(request),
                    preexec=preexec,
                    pass_fds=pass_fds,
                )
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if cwd is not None and exc.filename == cwd:
                reason = f'the working directory "{cwd}" cannot be used ({reason})'
            raise BashSpawnError(f"cannot start {config.shell}: {reason}") from exc
        run = BashRun(process.pid, self._capture("stdout"), self._capture("stderr"))
        limit = timeout or None
        timed_out = False
        try:
            try:
                if request.on_start is not None:
                    request.on_start(run)
                with anyio.move_on_after(math.inf if limit is None else limit / 1000) as deadline:
                    async with anyio.create_task_group() as tg:
                        _pumps(tg, process, run)
                        await process.wait()
                        _signal_group(process.pid, signal.SIGKILL)  # what the shell left
                if deadline.cancelled_caught:
                    timed_out = True
                    await self._stop(process, run)
            except BaseException as exc:
                with anyio.CancelScope(shield=True):
                    await self._stop(process, run)
                # A cancellation that came first is recorded (a job keeps the result).
                cancelled = isinstance(exc, anyio.get_cancelled_exc_class()) and not timed_out
                run.result = _result(process, run, limit, timed_out, aborted=cancelled)
                raise
        finally:
            run.stdout.close()
            run.stderr.close()
            await reap(process)
        result = run.result = _result(process, run, limit, timed_out, aborted=False)
        return result

    def _capture(self, name: str) -> StreamCapture:
        config = self.config
        return StreamCapture(
            name,
            max_bytes=config.max_output_bytes,
            spill_max_bytes=config.spill_max_bytes,
            folder=self.spill,
        )

    async def _stop(self, process: Process, run: BashRun) -> None:
        """SIGTERM to the group, SIGKILL after the grace, then read what the pipes
        still hold (for at most the grace: a process that left the group may keep
        them open)."""
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            with anyio.move_on_after(self._grace):
                await process.wait()
            if process.returncode is None:
                _signal_group(process.pid, signal.SIGKILL)
                await process.wait()
        _signal_group(process.pid, signal.SIGKILL)
        with anyio.move_on_after(self._grace):
            async with anyio.create_task_group() as tg:
                _pumps(tg, process, run)


def _pumps(tg: anyio.abc.TaskGroup, process: Process, run: BashRun) -> None:
    assert process.stdout is not None
    assert process.stderr is not None
    tg.start_soon(_pump, process.stdout, run.stdout)
    tg.start_soon(_pump, process.stderr, run.stderr)


async def _pump(stream: ByteReceiveStream, capture: StreamCapture) -> None:
    with contextlib.suppress(anyio.EndOfStream):
        while True:
            capture.write(await stream.receive())


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # Gone already (nothing left in the group), or a member we may not signal.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _result(
    process: Process, run: BashRun, timeout: int | None, timed_out: bool, *, aborted: bool
) -> BashResult:
    code = process.returncode
    assert code is not None
    return BashResult(
        exit_code=code if code >= 0 else None,
        signal=signal_name(-code) if code < 0 else None,
        timed_out=timed_out,
        aborted=aborted,
        stdout=run.stdout.output(),
        stderr=run.stderr.output(),
        timeout_ms=timeout,
    )
