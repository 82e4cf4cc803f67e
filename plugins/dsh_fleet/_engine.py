"""The engine seam: what an engine is given (jobs), what it hands back (results), and
the local engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio

__all__ = [
    "Engine",
    "EngineFactory",
    "EngineOptions",
    "Job",
    "LocalEngine",
    "ResultCallback",
    "TaskResult",
    "run_bounded",
]


@dataclass(frozen=True, slots=True)
class Job:
    """Run or resume the session of one task: what crosses to a worker (ids and the
    prompt, never a log). ``model`` and ``cwd`` are resolved by the driver."""

    task: str
    session: str
    prompt: str
    model: str
    cwd: str

    def to_json(self) -> dict[str, str]:
        return {
            "task": self.task,
            "session": self.session,
            "prompt": self.prompt,
            "model": self.model,
            "cwd": self.cwd,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Job:
        return cls(data["task"], data["session"], data["prompt"], data["model"], data["cwd"])


@dataclass(frozen=True, slots=True)
class TaskResult:
    """How a task's session ended: its last turn's stop reason (the ``turn/end`` kind:
    ``completed``, ``max-tokens``, ``error``, ``blocked``, ``aborted``, ``interrupted``),
    the text of its last answer (None without one) and the usage of every model step
    of the session summed (the ``dsh_llm.Usage`` JSON, None when none was recorded).

    ``error`` says why a job failed without an answer from its session (a worker that
    kept dying, a session another writer holds); it is not part of the JSON line.
    """

    task: str
    session: str
    output: str | None
    stop_reason: str | None
    usage: Mapping[str, int] | None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The result line: ``{task, session, output, stop_reason, usage}``."""
        return {
            "task": self.task,
            "session": self.session,
            "output": self.output,
            "stop_reason": self.stop_reason,
            "usage": None if self.usage is None else dict(self.usage),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], error: str | None = None) -> TaskResult:
        return cls(
            data["task"],
            data["session"],
            data["output"],
            data["stop_reason"],
            data["usage"],
            error,
        )

    @classmethod
    def failed(cls, job: Job, error: str) -> TaskResult:
        """The result of a job that ended without an answer from its session."""
        return cls(job.task, job.session, None, "error", None, error)


ResultCallback = Callable[[TaskResult], object]


async def run_bounded(
    jobs: Sequence[Job],
    concurrency: int,
    run: Callable[[Job], Awaitable[TaskResult]],
    on_result: ResultCallback | None,
) -> list[TaskResult]:
    """``run`` every job, at most ``concurrency`` at once; each result goes to
    ``on_result`` as it comes, and the results are returned in the jobs' order. An
    engine's loop over its jobs, whatever runs them."""
    results: list[TaskResult | None] = [None] * len(jobs)
    limit = anyio.Semaphore(concurrency)

    async def one(index: int, job: Job) -> None:
        async with limit:
            result = await run(job)
        results[index] = result
        if on_result is not None:
            on_result(result)

    async with anyio.create_task_group() as tg:
        for index, job in enumerate(jobs):
            tg.start_soon(one, index, job)
    return [result for result in results if result is not None]


class Engine(Protocol):
    """Dispatches jobs: each job's session is run or resumed at least once, by
    ``Fleet.run_job`` wherever the engine places it. The session log, not the engine,
    is the record: an engine may run a job again (a worker died), and the store's
    leases fence the older attempt off."""

    async def dispatch(
        self, jobs: Sequence[Job], *, on_result: ResultCallback | None = None
    ) -> list[TaskResult]:
        """Run every job; return their results in the order of ``jobs``, calling
        ``on_result`` with each as it arrives. A job that fails gets
        :meth:`TaskResult.failed`; nothing a job raises escapes."""
        ...


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """What the command line gives an engine: the deployment file (workers elsewhere
    load it), how many sessions may run at once, and the cluster to join (None: the
    engine's own default)."""

    deployment: Path
    concurrency: int
    address: str | None = None


#: Makes an engine for one ``dsh fleet run`` (see ``Fleet.register_engine``).
EngineFactory = Callable[[EngineOptions], Engine]


class LocalEngine:
    """Runs the jobs in this process, at most ``concurrency`` sessions at once, each
    by ``run_job`` (``Fleet.run_job`` of the deployment this process loaded)."""

    def __init__(self, run_job: Callable[[Job], Awaitable[TaskResult]], concurrency: int) -> None:
        self._run_job = run_job
        self.concurrency = concurrency

    def __repr__(self) -> str:
        return f"<LocalEngine concurrency={self.concurrency}>"

    async def dispatch(
        self, jobs: Sequence[Job], *, on_result: ResultCallback | None = None
    ) -> list[TaskResult]:
        return await run_bounded(jobs, self.concurrency, self._result_of, on_result)

    async def _result_of(self, job: Job) -> TaskResult:
        try:
            return await self._run_job(job)
        except Exception as exc:
            return TaskResult.failed(job, f"{type(exc).__name__}: {exc}")
