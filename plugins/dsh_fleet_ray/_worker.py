"""``FleetWorker``: one worker process's deployment, loaded once, running jobs.

It is a plain class: the Ray engine makes it an actor (``ray.remote(FleetWorker)``),
and tests use it as it is. Ray calls its methods on threads of its own; the deployment
lives in an event loop of its own (anyio's asyncio backend, in a thread started here),
and every call hands its work to that loop, so the worker runs as many sessions at
once as Ray lets calls in (the actor's ``max_concurrency``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import anyio.from_thread

from dsh import Context, load_deployment
from dsh_fleet import Fleet, FleetError, Job

__all__ = ["FleetWorker"]


class FleetWorker:
    """The deployment at ``deployment`` loaded in this process, with ``cwd`` (the
    driver's working directory, where relative paths of the deployment point) as the
    process's working directory when it exists here."""

    def __init__(self, deployment: str, cwd: str | None = None) -> None:
        if cwd is not None and Path(cwd).is_dir():
            os.chdir(cwd)
        self._stack = contextlib.ExitStack()
        try:
            portal = self._stack.enter_context(
                anyio.from_thread.start_blocking_portal(backend="asyncio")
            )
            root = self._stack.enter_context(portal.wrap_async_context_manager(Context()))
            portal.call(load_deployment, Path(deployment), root)
            fleet = root.get("fleet")
            if not isinstance(fleet, Fleet):
                raise FleetError(f"{deployment}: the deployment has no fleet plugin")
        except BaseException:
            self._stack.close()
            raise
        self._portal = portal
        self._fleet: Fleet = fleet
        self._stack.enter_context(self._closed_on_sigterm())

    @contextlib.contextmanager
    def _closed_on_sigterm(self) -> Iterator[None]:
        """While the deployment is loaded (in the main thread, where signals arrive),
        SIGTERM first closes it — the running turns record their end — then does what
        was installed before (Ray's handler exits the process; the default ends it).
        Without this the process outlives SIGTERM: the thread of the deployment's
        event loop keeps the interpreter from finishing."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            self.close()  # which puts `previous` back
            if callable(previous):
                previous(signum, frame)
            else:
                signal.raise_signal(signum)  # the default ends the process; SIG_IGN: nothing

        signal.signal(signal.SIGTERM, on_sigterm)
        try:
            yield
        finally:
            if signal.getsignal(signal.SIGTERM) is on_sigterm:
                signal.signal(signal.SIGTERM, previous)

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        """Run ``job`` (``Job.to_json()``) here and return its ``TaskResult.to_json()``,
        or ``{"error": "<type>: <message>"}`` when it raised (errors cross as text, so
        no exception has to survive pickling)."""
        try:
            result = self._portal.call(self._fleet.run_job, Job.from_json(job))
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        return result.to_json()

    def info(self) -> dict[str, int]:
        """This process: its id and its peak resident memory in bytes."""
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {"pid": os.getpid(), "max_rss": peak}

    def close(self) -> None:
        """Unload the deployment and stop its event loop (idempotent)."""
        self._stack.close()
