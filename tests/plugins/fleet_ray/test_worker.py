"""fleet-ray without a cluster: the worker (what each Ray actor runs) used as a plain
object, the engine's placement and retries over fake workers, the cluster helpers, the
plugin."""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import ray

from dsh import Context, PluginLoadError, load_deployment
from dsh.testing import capture_logs
from dsh_fleet import EngineOptions, FleetError, Job, TaskResult
from dsh_fleet_ray import (
    LOOPBACK_ENV,
    FleetRay,
    FleetRayConfig,
    FleetWorker,
    RayEngine,
    connected,
    is_loopback,
    load_ray,
)
from dsh_fleet_ray._engine import _Pool
from tests.plugins.fleet.fleet_support import block, fleet_deployment, loaded
from tests.plugins.session_jsonl.jsonl_support import file_records
from tests.support import HELLO

pytestmark = pytest.mark.anyio

RAY_ENTRY = "- {id: ray, name: fleet-ray, config: {workers: 2}}"


def job_of(path: Path, task: str, prompt: str) -> Job:
    return Job(task, f"{task}-session", prompt, "fleet-mock", str(path.parent))


async def test_a_worker_loads_the_deployment_once_and_runs_jobs(tmp_path: Path) -> None:
    path = fleet_deployment(tmp_path, extra=RAY_ENTRY)
    here = os.getcwd()
    worker = await anyio.to_thread.run_sync(FleetWorker, str(path), here)
    try:
        jobs = [job_of(path, f"t{n}", f"answer {n}").to_json() for n in range(3)]
        async with anyio.create_task_group() as tg:
            results: list[dict[str, Any]] = []

            async def run(job: dict[str, Any]) -> None:
                results.append(await anyio.to_thread.run_sync(worker.run, job))

            for job in jobs:
                tg.start_soon(run, job)
        assert sorted(r["output"] for r in results) == [f"answer: answer {n}" for n in range(3)]
        held = await anyio.to_thread.run_sync(worker.run, {**jobs[0], "session": "../x"})
        assert held["error"].startswith("SessionIdError: invalid session id '../x'")
        info = worker.info()
        assert info["pid"] == os.getpid()
        assert info["max_rss"] > 1 << 20
    finally:
        worker.close()
        worker.close()
    assert os.getcwd() == here
    # What it stored is the store's: another process (here, a fresh root) reads it.
    async with loaded(path) as (root, _):
        assert len(root.sessions.stored()) == 3


async def test_a_worker_needs_a_deployment_with_a_fleet(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="the deployment has no fleet plugin"):
        await anyio.to_thread.run_sync(FleetWorker, str(HELLO), str(tmp_path / "nowhere"))
    assert os.getcwd() != str(tmp_path / "nowhere")


# -- the engine over fake workers -----------------------------------------------------------


class Remote:
    def __init__(self, answer: Callable[[], Awaitable[Any]]) -> None:
        self.answer = answer
        self.calls = 0

    def remote(self, *args: Any) -> Awaitable[Any]:
        self.calls += 1
        return self.answer()


class Info:
    """A worker's ``info``: the process ids in ``pids`` in turn, one a call (the first
    is the one it started as), the last from then on (``None``: the actor is gone for
    good, ``ActorDiedError``).
    ``options(max_task_retries=-1)`` is the call Ray holds while the actor restarts."""

    def __init__(self, pids: list[int | None]) -> None:
        self.pids = pids
        self.waits = 0

    def options(self, **options: Any) -> Info:
        assert options == {"max_task_retries": -1}
        self.waits += 1
        return self

    def next_pid(self) -> int | None:
        return self.pids.pop(0) if len(self.pids) > 1 else self.pids[0]

    async def answer(self) -> dict[str, int]:
        pid = self.next_pid()
        if pid is None:
            raise ray.exceptions.ActorDiedError()
        return {"pid": pid, "max_rss": 1 << 20}

    def remote(self) -> Awaitable[dict[str, int]]:
        return self.answer()


class FakeWorker:
    """A worker handle whose ``run`` answers with ``answer`` (an async function) and
    whose ``info`` answers ``pids`` (see :class:`Info`)."""

    def __init__(self, answer: Callable[[], Awaitable[Any]], pids: list[int | None]) -> None:
        self.run = Remote(answer)
        self.info = Info(pids)


def pool_of(*workers: FakeWorker) -> _Pool:
    return _Pool(list(workers), [w.info.next_pid() for w in workers])


def engine(**config: Any) -> RayEngine:
    return RayEngine(EngineOptions(Path("dsh.yml"), 4), FleetRayConfig(**config))


def failing(times: int, error: Callable[[], BaseException]) -> Callable[[], Awaitable[Any]]:
    """A ``run`` that raises ``error()`` the first ``times`` calls, then completes."""
    calls = 0

    async def answer() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls <= times:
            raise error()
        return TaskResult("t", "s", "out", "completed", None).to_json()

    return answer


def unavailable() -> BaseException:
    return ray.exceptions.ActorUnavailableError("The actor is restarting", None)


async def test_a_job_is_dispatched_again_once_its_worker_is_back_after_each_death() -> None:
    job = Job("t", "s", "p", "m", "/")
    dying = FakeWorker(failing(2, unavailable), [10, 11, 12])  # a new process each time
    result = await engine(max_retries=2)._run_one(ray, pool_of(dying), job)
    assert (result.output, dying.run.calls, dying.info.waits) == ("out", 3, 2)
    dies_twice = FakeWorker(failing(2, ray.exceptions.RayActorError), [10, 11, 12])
    given_up = await engine(max_retries=1)._run_one(ray, pool_of(dies_twice), job)
    assert given_up.stop_reason == "error"
    assert given_up.error is not None
    assert given_up.error.startswith("its worker died 2 time(s); the last: ")


async def test_a_worker_unreachable_for_a_while_costs_no_retry() -> None:
    """Back as the same process: not a death, however often (``max_retries: 0``)."""
    job = Job("t", "s", "p", "m", "/")
    flaky = FakeWorker(failing(3, unavailable), [10])
    with capture_logs("dsh.fleet-ray", logging.INFO) as logs:
        result = await engine(max_retries=0)._run_one(ray, pool_of(flaky), job)
    assert (result.output, flaky.run.calls, flaky.info.waits) == ("out", 4, 3)
    assert sum("its worker was unreachable" in m for m in logs.messages()) == 3
    assert not any("died" in m for m in logs.messages())


async def test_a_worker_gone_for_good_leaves_its_jobs_to_the_others() -> None:
    job = Job("t", "s", "p", "m", "/")
    gone = FakeWorker(failing(1, ray.exceptions.ActorDiedError), [10, None])
    other = FakeWorker(failing(0, unavailable), [20])
    pool = pool_of(gone, other)
    pool.busy[1] = 5  # the busier one: the job goes to `gone` first
    result = await engine(max_retries=1)._run_one(ray, pool, job)
    assert (result.output, gone.run.calls, other.run.calls) == ("out", 1, 1)
    assert pool.pids == [None, 20]
    assert pool.pick() == 1
    alone = pool_of(FakeWorker(failing(1, ray.exceptions.ActorDiedError), [10, None]))
    result = await engine(max_retries=3)._run_one(ray, alone, job)
    assert result.error == "every fleet worker is gone (after 1 death(s))"


async def test_other_failures_are_failed_results() -> None:
    job = Job("t", "s", "p", "m", "/")

    async def lost() -> None:
        raise ray.exceptions.RaySystemError("the object store went away")  # type: ignore[no-untyped-call]

    async def refused() -> dict[str, str]:
        return {"error": "SessionInUseError: held"}

    result = await engine()._run_one(ray, pool_of(FakeWorker(lost, [1])), job)
    assert result.error == "RaySystemError: System error: the object store went away"
    result = await engine()._run_one(ray, pool_of(FakeWorker(refused, [1])), job)
    assert result == TaskResult.failed(job, "SessionInUseError: held")
    with pytest.raises(FleetError, match="a fleet worker could not start"):
        await engine()._started(ray, [FakeWorker(refused, [None])])


async def test_a_worker_that_does_not_report_at_the_end_is_counted_not_raised() -> None:
    """After the run, a worker still restarting (a death no job waited for) or gone
    answers ``info`` with an ``RayActorError``: the run's results stand."""

    class Restarting:
        class info:  # the handle's method
            @staticmethod
            async def remote() -> None:
                raise unavailable()

    made = engine()
    assert await made._started(ray, [FakeWorker(refused_never, [7])]) == [7]
    await made._read_infos(ray, [Restarting(), FakeWorker(refused_never, [7])])
    assert (made.workers, made.unavailable) == ([{"pid": 7, "max_rss": 1 << 20}], 1)


async def refused_never() -> None:
    raise AssertionError("not called")


async def test_jobs_go_to_the_least_busy_worker() -> None:
    pool = _Pool(["a", "b", "c", "d"], [1, 2, 3, None])
    pool.busy[:] = [2, 0, 1, 0]
    assert pool.pick() == 1
    pool.waited[1] = 1  # someone waits for it to come back: the others first
    assert pool.pick() == 2
    pool.waited[2] = pool.waited[0] = 1
    assert pool.pick() == 1
    assert engine().pool_size(8.0, 100) == 4  # at most the sessions at once
    assert engine(workers=2).pool_size(8.0, 100) == 2
    assert engine(workers=3).pool_size(8.0, 1) == 1
    assert engine(num_cpus=2).pool_size(6.0, 100) == 3
    assert engine(num_cpus=0).pool_size(3.0, 100) == 3
    assert engine(num_cpus=4).pool_size(2.0, 100) == 1
    assert repr(engine()) == "<RayEngine a local cluster concurrency=4>"
    joined = RayEngine(EngineOptions(Path("f"), 2, "10.0.0.1:6379"), FleetRayConfig())
    assert repr(joined) == "<RayEngine 10.0.0.1:6379 concurrency=2>"
    assert await engine().dispatch([]) == []


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_the_engine_needs_asyncio() -> None:
    with pytest.raises(FleetError, match="runs on anyio's asyncio backend only"):
        await engine().dispatch([Job("t", "s", "p", "m", "/")])


# -- the cluster helpers and the plugin ----------------------------------------------------


def test_loopback_addresses() -> None:
    for host in ("127.0.0.1", "127.0.0.1:6379", "localhost", "localhost:1", "::1", "[::1]:80"):
        assert is_loopback(host), host
    for host in ("10.0.0.1:6379", "0.0.0.0", "ray-head:6379", "example.org"):
        assert not is_loopback(host), host


def test_a_process_with_ray_running_keeps_its_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in LOOPBACK_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "1")  # the user's choice wins
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    with connected("127.0.0.1:1") as module:
        assert module is ray
        assert os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
        assert os.environ["RAY_USAGE_STATS_ENABLED"] == "1"
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ
    with connected("10.0.0.1:6379"):
        assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ


def test_without_ray_the_plugin_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(PluginLoadError, match=r"pip install 'dsh-harness\[ray\]'"):
        load_ray()


async def test_the_plugin_offers_the_ray_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fleet_deployment(tmp_path, extra=RAY_ENTRY)
    async with loaded(path) as (_, fleet):
        assert fleet.engines() == ["local", "ray"]
        made = fleet.engine("ray", EngineOptions(path, 3, "127.0.0.1:1"))
        assert isinstance(made, RayEngine)
        assert made.config.workers == 2
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    monkeypatch.setitem(sys.modules, "ray", None)
    async with Context() as root:
        with pytest.raises(Exception, match=r"dsh-harness\[ray\]"):
            await load_deployment(path, root)
    assert FleetRay.name == "fleet-ray"


def blocked(fifo: Path) -> int:
    """The process id the test model writes to ``fifo`` once its turn blocks."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    seen = b""
    try:
        while not seen.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], 30)
            assert ready, "the model never blocked"
            seen += os.read(fd, 64)
    finally:
        os.close(fd)
    return int(seen)


def test_sigterm_closes_a_worker_first_then_does_what_was_there(tmp_path: Path) -> None:
    """A Ray worker gets SIGTERM (in its main thread, where it loaded the deployment):
    the running turn records its end, then Ray's handler (here a stand-in) runs."""
    path = fleet_deployment(tmp_path)
    block(tmp_path / "control", "b")
    heard: list[int] = []

    def ray_handler(signum: int, frame: object) -> None:
        heard.append(signum)

    before = signal.signal(signal.SIGTERM, ray_handler)
    try:
        worker = FleetWorker(str(path), os.getcwd())
        results: list[dict[str, Any]] = []
        job = job_of(path, "b", "block b").to_json()
        running = threading.Thread(target=lambda: results.append(worker.run(job)))
        running.start()
        assert blocked(tmp_path / "control" / "fifo") == os.getpid()
        os.kill(os.getpid(), signal.SIGTERM)
        running.join(30)
        assert heard == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is ray_handler  # put back
        [result] = results
        assert result["stop_reason"] == "aborted"
        records = file_records(tmp_path / "sessions" / "b-session" / "session.jsonl")
        assert records[-1]["data"]["reason"] == {"kind": "aborted", "reason": "disposed"}
        worker.close()  # closed already: nothing happens
    finally:
        signal.signal(signal.SIGTERM, before)


def test_sigterm_ignored_before_only_closes_the_worker(tmp_path: Path) -> None:
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        worker = FleetWorker(str(fleet_deployment(tmp_path)))
        os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        closed = worker.run(job_of(tmp_path, "t", "answer").to_json())
        assert closed["error"].startswith("RuntimeError: ")  # its event loop is gone
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_handler_installed_after_the_worker_is_left_in_place(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        worker = FleetWorker(str(fleet_deployment(tmp_path)))
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # someone else's, since
        worker.close()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)
