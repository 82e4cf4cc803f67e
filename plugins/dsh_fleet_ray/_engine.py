"""``RayEngine``: a pool of Ray actors (``FleetWorker``), each with the deployment
loaded once; jobs are placed on the least busy one and dispatched again when their
worker dies."""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Sequence
from typing import Any

import anyio

from dsh_fleet import EngineOptions, FleetError, Job, ResultCallback, TaskResult

from ._cluster import connected
from ._config import FleetRayConfig
from ._worker import FleetWorker

__all__ = ["RayEngine"]

_log = logging.getLogger("dsh.fleet-ray")


def _on_asyncio() -> bool:
    """Whether this task runs on asyncio: Ray's object refs are awaited on asyncio
    only (Ray has no trio integration)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _Pool:
    """The workers of one run and how many jobs each is running."""

    def __init__(self, workers: list[Any]) -> None:
        self.workers = workers
        self.busy = [0] * len(workers)

    def pick(self) -> int:
        return min(range(len(self.workers)), key=self.busy.__getitem__)


class RayEngine:
    """Runs jobs on a pool of Ray actors (see the package README for the cluster it
    uses). Only jobs and results cross Ray: each worker reads and writes the sessions
    itself, through the deployment's store."""

    def __init__(self, options: EngineOptions, config: FleetRayConfig) -> None:
        self.options = options
        self.config = config
        #: The process id and peak resident memory (``max_rss``, bytes) of each worker,
        #: read when the last dispatch finished.
        self.workers: list[dict[str, int]] = []

    def __repr__(self) -> str:
        where = self.options.address or "a local cluster"
        return f"<RayEngine {where} concurrency={self.options.concurrency}>"

    def pool_size(self, cpus: float, jobs: int) -> int:
        """How many workers a run of ``jobs`` jobs starts on a cluster of ``cpus``
        CPUs: the ``workers`` config key, else as many as the CPUs hold (at least one),
        never more than the sessions that may run at once."""
        wanted = self.config.workers
        if wanted is None:
            per = self.config.num_cpus
            wanted = max(1, int(cpus // per) if per > 0 else int(cpus))
        return max(1, min(wanted, jobs, self.options.concurrency))

    async def dispatch(
        self, jobs: Sequence[Job], *, on_result: ResultCallback | None = None
    ) -> list[TaskResult]:
        if not jobs:
            return []
        if not _on_asyncio():
            raise FleetError("the ray engine runs on anyio's asyncio backend only")
        config = self.config
        with connected(self.options.address, host=config.host, cpus=config.local_cpus) as ray:
            size = self.pool_size(ray.cluster_resources().get("CPU", 1.0), len(jobs))
            actor = ray.remote(FleetWorker).options(
                num_cpus=config.num_cpus,
                max_restarts=-1,
                max_concurrency=math.ceil(self.options.concurrency / size),
            )
            workers = [actor.remote(str(self.options.deployment), os.getcwd()) for _ in range(size)]
            try:
                await self._started(ray, workers)
                results = await self._run_all(ray, _Pool(workers), jobs, on_result)
                self.workers = [await worker.info.remote() for worker in workers]
                return results
            finally:
                for worker in workers:
                    ray.kill(worker)

    async def _started(self, ray: Any, workers: list[Any]) -> None:
        """Wait until every worker loaded the deployment; a worker that cannot fails
        the run (:class:`FleetError` with its reason)."""
        for worker in workers:
            try:
                info = await worker.info.remote()
            except ray.exceptions.RayActorError as exc:
                raise FleetError(f"a fleet worker could not start: {exc}") from exc
            _log.debug("fleet worker %d started", info["pid"])

    async def _run_all(
        self, ray: Any, pool: _Pool, jobs: Sequence[Job], on_result: ResultCallback | None
    ) -> list[TaskResult]:
        results: list[TaskResult | None] = [None] * len(jobs)
        limit = anyio.Semaphore(self.options.concurrency)

        async def one(index: int, job: Job) -> None:
            async with limit:
                result = await self._run_one(ray, pool, job)
            results[index] = result
            if on_result is not None:
                on_result(result)

        async with anyio.create_task_group() as tg:
            for index, job in enumerate(jobs):
                tg.start_soon(one, index, job)
        return [result for result in results if result is not None]

    async def _run_one(self, ray: Any, pool: _Pool, job: Job) -> TaskResult:
        """Run ``job`` on the least busy worker; again (on a restarted worker) each
        time its worker dies, at most ``max_retries`` times."""
        retries = self.config.max_retries
        deaths = 0
        while True:
            index = pool.pick()
            pool.busy[index] += 1
            try:
                data: dict[str, Any] = await pool.workers[index].run.remote(job.to_json())
            except ray.exceptions.RayActorError as exc:
                deaths += 1
                reason = str(exc).splitlines()[0]
                if deaths > retries:
                    return TaskResult.failed(
                        job, f"its worker died {deaths} time(s); the last: {reason}"
                    )
                _log.warning(
                    "task %r: its worker died (%s); dispatching it again (retry %d of %d)",
                    job.task,
                    reason,
                    deaths,
                    retries,
                )
                continue
            except ray.exceptions.RayError as exc:
                return TaskResult.failed(job, f"{type(exc).__name__}: {exc}")
            finally:
                pool.busy[index] -= 1
            if "error" in data:
                return TaskResult.failed(job, data["error"])
            return TaskResult.from_json(data)
