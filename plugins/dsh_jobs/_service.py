"""The ``Jobs`` service: background commands, owned by the session that started them."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from pydantic import BaseModel, ConfigDict, Field

from dsh import Context, Disposer, Service
from dsh_bash import BashRequest, BashRun

from ._errors import JobLimitError, JobNotFoundError
from ._job import Job

__all__ = ["Jobs", "JobsConfig"]


class JobsConfig(BaseModel):
    """Config of the ``jobs`` service."""

    model_config = ConfigDict(extra="forbid")

    #: How many jobs may run at once, across every session of the runtime.
    max_running: int = Field(default=16, ge=1)


def _session_of(agent: Any) -> str | None:
    if agent is None:
        return None
    session_id: str = agent.session.id
    return session_id


class Jobs(Service):
    """Background commands (ctx key ``jobs``), run through the ``bash`` seam.

    A job belongs to the session of the agent that started it: only that session sees
    it, and it is killed when that agent is disposed. Every job still running is
    killed when this service unloads. Jobs have no timeout.
    """

    key = "jobs"
    name = "jobs"
    Config = JobsConfig
    inject = ("bash",)

    def __init__(self, ctx: Context, config: JobsConfig) -> None:
        super().__init__(ctx, config)
        self._jobs: dict[str, Job] = {}
        self._count = 0
        self._tg: TaskGroup | None = None

    async def setup(self) -> AsyncIterator[Disposer]:
        ready = anyio.Event()
        yield self.home_ctx.task(self._host, ready, label="jobs")
        await ready.wait()

    async def _host(self, ready: anyio.Event) -> None:
        """The task group every job runs in; cancelled (killing them) on unload."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            ready.set()
            await anyio.sleep_forever()

    @property
    def running(self) -> int:
        """How many jobs are running now (in every session)."""
        return sum(not job.finished for job in self._jobs.values())

    async def start(self, request: BashRequest, *, agent: Any = None) -> Job:
        """Start ``request`` as a job of ``agent``'s session (no timeout: its
        ``timeout_ms`` is ignored) and return it once the command has started.

        Raises :class:`JobLimitError` when ``max_running`` jobs run already, and what
        ``bash.run`` raises before the command starts (a spawn failure, a bad request).
        """
        limit = self.config.max_running
        if self.running >= limit:
            raise JobLimitError(
                f"{limit} background jobs are running, the most the jobs config "
                "(max_running) allows: wait for one to finish or kill one"
            )
        tg = self._tg
        assert tg is not None  # set before the service is active, cleared only after
        self._count += 1
        job = Job(f"j{self._count}", request.command, _session_of(agent))
        self._jobs[job.id] = job
        tie: Disposer | None = None
        try:
            if agent is not None:
                tie = agent.ctx.effect(
                    lambda: functools.partial(self._forget, job), label=f"job {job.id}"
                )
            await tg.start(self._drive, job, request)
        except BaseException:
            del self._jobs[job.id]
            if tie is not None:
                tie()
            raise
        return job

    async def _drive(
        self, job: Job, request: BashRequest, *, task_status: TaskStatus[None]
    ) -> None:
        def started(run: BashRun) -> None:
            job.run = run
            task_status.started()

        try:
            with job.scope:
                await self.home_ctx.bash.run(
                    dataclasses.replace(request, timeout_ms=0, on_start=started)
                )
        except Exception as exc:
            if job.run is None:
                raise  # it never started: the caller of start() gets the error
            job.error = exc
            if job.run.result is None:
                self.home_ctx.logger.error("background job %s failed", job.id, exc_info=exc)
        finally:
            job.end()

    def _forget(self, job: Job) -> Awaitable[None] | None:
        """Undo of a job's tie to its agent: kill it if it runs, then forget it."""
        self._jobs.pop(job.id, None)
        if job.finished:
            return None
        job.scope.cancel()
        return job.wait()

    def get(self, job_id: str, *, agent: Any = None) -> Job:
        """The job ``job_id`` of ``agent``'s session; :class:`JobNotFoundError` for an
        unknown id and for another session's job."""
        job = self._jobs.get(job_id)
        if job is None or job.session_id != _session_of(agent):
            raise JobNotFoundError(f'no background job "{job_id}" in this session')
        return job

    def list(self, *, agent: Any = None) -> list[Job]:
        """The jobs of ``agent``'s session, oldest first (finished ones too)."""
        session = _session_of(agent)
        return [job for job in self._jobs.values() if job.session_id == session]

    async def kill(self, job: Job) -> bool:
        """Stop ``job`` (SIGTERM to its process group, SIGKILL after the executor's
        grace) and wait until it has ended; False when it had finished already."""
        if job.finished:
            return False
        job.scope.cancel()
        await job.wait()
        return True
