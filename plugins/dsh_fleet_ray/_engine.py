"""``RayEngine``: a pool of Ray actors (``FleetWorker``), each with the deployment
loaded once; jobs are placed on the least busy one and dispatched again, once their
worker is back (or on another), when their worker dies."""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Sequence
from typing import Any

from dsh_fleet import EngineOptions, FleetError, Job, ResultCallback, TaskResult, run_bounded

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
    """The workers of one run: how many jobs each is running, the process each was
    last seen in (``None``: gone for good), and which are being waited for."""

    def __init__(self, workers: list[Any], pids: list[int | None]) -> None:
        self.workers = workers
        self.busy = [0] * len(workers)
        self.pids = list(pids)
        self.waited = [0] * len(workers)

    def pick(self) -> int | None:
        """The least busy worker still there, one nobody is waiting for first; None
        when every worker is gone."""
        alive = [i for i, pid in enumerate(self.pids) if pid is not None]
        if not alive:
            return None
        return min(alive, key=lambda i: (self.waited[i] > 0, self.busy[i]))

    async def back(self, ray: Any, index: int) -> int | None:
        """The process of worker ``index`` once it answers again: Ray holds the call
        while the actor restarts (``max_task_retries=-1``), so this awaits the restart
        rather than polling it. ``None`` (and the worker left out from now on) when it
        is gone for good (``ActorDiedError``)."""
        self.waited[index] += 1
        try:
            info = await self.workers[index].info.options(max_task_retries=-1).remote()
        except ray.exceptions.RayActorError:
            self.pids[index] = None
        else:
            self.pids[index] = info["pid"]
        finally:
            self.waited[index] -= 1
        return self.pids[index]


class RayEngine:
    """Runs jobs on a pool of Ray actors (see the package README for the cluster it
    uses). Only jobs and results cross Ray: each worker reads and writes the sessions
    itself, through the deployment's store."""

    def __init__(self, options: EngineOptions, config: FleetRayConfig) -> None:
        self.options = options
        self.config = config
        #: The process id and peak resident memory (``max_rss``, bytes) of each worker
        #: that answered when the last dispatch finished.
        self.workers: list[dict[str, int]] = []
        #: How many workers did not answer then (restarting, or gone for good).
        self.unavailable = 0

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
                pids = await self._started(ray, workers)
                results = await self._run_all(ray, _Pool(workers, pids), jobs, on_result)
                await self._read_infos(ray, workers)
                return results
            finally:
                for worker in workers:
                    ray.kill(worker)

    async def _started(self, ray: Any, workers: list[Any]) -> list[int | None]:
        """Wait until every worker loaded the deployment and return their processes;
        a worker that cannot fails the run (:class:`FleetError` with its reason)."""
        pids: list[int | None] = []
        for worker in workers:
            try:
                info = await worker.info.remote()
            except ray.exceptions.RayActorError as exc:
                raise FleetError(f"a fleet worker could not start: {exc}") from exc
            _log.debug("fleet worker %d started", info["pid"])
            pids.append(info["pid"])
        return pids

    async def _read_infos(self, ray: Any, workers: list[Any]) -> None:
        """Record each worker's process and peak memory; a worker that does not answer
        at once (restarting after a death nobody waited for, or gone) is counted in
        ``unavailable`` instead: the results are in, nothing waits for it."""
        self.workers = []
        self.unavailable = 0
        for worker in workers:
            try:
                self.workers.append(await worker.info.remote())
            except ray.exceptions.RayActorError as exc:
                self.unavailable += 1
                _log.info("a fleet worker did not report: %s", str(exc).splitlines()[0])

    async def _run_all(
        self, ray: Any, pool: _Pool, jobs: Sequence[Job], on_result: ResultCallback | None
    ) -> list[TaskResult]:
        async def run(job: Job) -> TaskResult:
            return await self._run_one(ray, pool, job)

        return await run_bounded(jobs, self.options.concurrency, run, on_result)

    async def _run_one(self, ray: Any, pool: _Pool, job: Job) -> TaskResult:
        """Run ``job`` on the least busy worker; when the call fails because its worker
        went (``RayActorError``), wait until that worker answers again and dispatch it
        again. Only a death counts against ``max_retries``: the worker came back as
        another process, or is gone for good. A worker that was only unreachable for a
        while (back as the same process) costs no retry; the retry resumes the session
        either way."""
        retries = self.config.max_retries
        deaths = 0
        while True:
            index = pool.pick()
            if index is None:
                return TaskResult.failed(
                    job, f"every fleet worker is gone (after {deaths} death(s))"
                )
            pid = pool.pids[index]
            pool.busy[index] += 1
            try:
                data: dict[str, Any] = await pool.workers[index].run.remote(job.to_json())
            except ray.exceptions.RayActorError as exc:
                failure = exc
            except ray.exceptions.RayError as exc:
                return TaskResult.failed(job, f"{type(exc).__name__}: {exc}")
            else:
                if "error" in data:
                    return TaskResult.failed(job, data["error"])
                return TaskResult.from_json(data)
            finally:
                pool.busy[index] -= 1
            reason = str(failure).splitlines()[0]
            if await pool.back(ray, index) == pid:
                _log.info(
                    "task %r: its worker was unreachable (%s); dispatching it again",
                    job.task,
                    reason,
                )
                continue
            deaths += 1
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
