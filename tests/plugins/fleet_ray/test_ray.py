"""The ray engine on a real local cluster (one for the session, loopback only): many
tasks on 2 workers, a worker killed mid-session, a second driver joining with
``--address``, and every listener of the cluster on the loopback address.

Asyncio only: the driver awaits Ray's object refs, which Ray resolves on asyncio (it
has no trio integration), and the workers run their sessions on anyio's asyncio
backend whatever the driver runs on.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import ray

from dsh.testing import capture_logs
from dsh_fleet import ATTEMPT_EVENT, EngineOptions, Fleet, TaskResult
from dsh_fleet_ray import RayEngine
from tests.plugins.fleet.fleet_support import (
    answer_tasks,
    block,
    blocked_pid,
    ends,
    fleet_deployment,
    lines,
    loaded,
    snapshot,
    types_of,
    write_tasks,
)
from tests.plugins.fleet_ray.ray_support import descendants, listeners
from tests.support import run_dsh

# One worker of `pytest -n --dist loadgroup` runs them all: one cluster, not one a worker.
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("ray-cluster")]

RESULT_KEYS = ("task", "session", "output", "stop_reason", "usage")
RAY = "- {id: ray, name: fleet-ray, config: {workers: 2, max_retries: 2}}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # see the module docstring


def on_ray(fleet: Fleet, path: Path, concurrency: int = 8) -> object:
    return fleet.engine("ray", EngineOptions(path, concurrency))


async def test_fifty_tasks_complete_on_two_workers(tmp_path: Path, ray_cluster: str) -> None:
    path = fleet_deployment(tmp_path, extra=RAY)
    tasks = write_tasks(tmp_path / "tasks.jsonl", answer_tasks(50))
    async with loaded(path) as (root, fleet):
        jobs = fleet.plan(fleet.read_tasks(tasks), path)
        arrived: list[TaskResult] = []
        engine = fleet.engine("ray", EngineOptions(path, 8))
        assert isinstance(engine, RayEngine)
        results = await fleet.run(jobs, engine, on_result=arrived.append)
        assert len(arrived) == 50
        # Two workers ran them, neither of them this process.
        assert len({w["pid"] for w in engine.workers} - {os.getpid()}) == 2
        assert [(r.task, r.output, r.stop_reason) for r in results] == [
            (f"t{n}", f"answer: answer {n}", "completed") for n in range(1, 51)
        ]
        assert sorted(s.id for s in root.sessions.stored()) == sorted(j.session for j in jobs)
        for job in jobs[:5]:
            session = await snapshot(fleet, job.session)
            assert ends(session) == ["completed"]
            assert types_of(session).count(ATTEMPT_EVENT) == 1


async def test_a_worker_killed_mid_session_is_retried_and_the_session_resumed(
    tmp_path: Path, ray_cluster: str
) -> None:
    path = fleet_deployment(tmp_path, extra=RAY)
    block(tmp_path / "control", "b")
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"id": "blocked", "prompt": "block b"}, *answer_tasks(3)]
    )
    async with loaded(path) as (_, fleet):
        jobs = fleet.plan(fleet.read_tasks(tasks), path)
        finished = anyio.Event()
        results: list[TaskResult] = []

        async def run() -> None:
            results.extend(await fleet.run(jobs, on_ray(fleet, path)))  # type: ignore[arg-type]
            finished.set()

        with capture_logs("dsh.fleet-ray", logging.WARNING) as logs:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                pid = await blocked_pid(tmp_path / "control" / "fifo", finished)
                assert pid is not None
                assert pid != os.getpid()  # a worker process
                os.kill(pid, signal.SIGKILL)
        assert [(r.task, r.stop_reason) for r in results] == [
            (job.task, "completed") for job in jobs
        ]
        assert results[0].output == "resumed"
        # A task the killed worker was also running is resumed the same way.
        for n, result in enumerate(results[1:], start=1):
            assert result.output in (f"answer: answer {n}", "resumed")
        assert any("its worker died" in m for m in logs.messages())
        for job in jobs:
            stored = await snapshot(fleet, job.session)
            assert [e.seq for e in stored.events] == list(range(len(stored.events)))
            # One record per attempt that committed anything, epochs rising: the other
            # task on the killed worker may have taken its lease and died before its
            # first commit (the kill comes as soon as the blocked task reports), so an
            # epoch may be missing.
            attempts = [e.data["epoch"] for e in stored.events if e.type == ATTEMPT_EVENT]
            assert attempts
            assert attempts == sorted(set(attempts))  # strictly rising
            assert ends(stored)[-1] == "completed"
        session = await snapshot(fleet, jobs[0].session)
    kinds = types_of(session)
    epochs = [session.events[i].data["epoch"] for i, k in enumerate(kinds) if k == ATTEMPT_EVENT]
    assert epochs == [1, 2]
    assert ends(session) == ["interrupted", "completed"]
    # One record of each: the tool call ran once, its result was kept, nothing repeated.
    assert kinds.count("tool/call") == kinds.count("tool/result") == 1
    assert [e.seq for e in session.events] == list(range(len(session.events)))
    second = kinds.index(ATTEMPT_EVENT, 1)
    assert kinds[second + 1] == "turn/end"  # the new attempt closed the old turn first
    assert all(e.data["turn"] == 2 for e in session.events[second + 2 :])


async def test_a_second_driver_joins_with_address(tmp_path: Path, ray_cluster: str) -> None:
    path = fleet_deployment(tmp_path, extra=RAY)
    tasks = write_tasks(tmp_path / "tasks.jsonl", answer_tasks(1))
    async with loaded(path) as (_, fleet):
        await fleet.run(
            fleet.plan(fleet.read_tasks(tasks), path), fleet.engine("local", EngineOptions(path, 1))
        )
    write_tasks(tasks, answer_tasks(4))
    args = ("fleet", "run", str(path), str(tasks), "--engine", "ray", "--address", ray_cluster)
    joined = await anyio.to_thread.run_sync(lambda: run_dsh(*args))
    assert joined.returncode == 0, joined.stderr
    results = lines(joined.stdout)
    assert (results[0]["task"], results[0]["stop_reason"]) == ("t1", "completed")
    assert sorted(r["task"] for r in results) == ["t1", "t2", "t3", "t4"]
    assert "fleet: 4 tasks: 4 done (1 skipped as finished)" in joined.stderr
    # The cluster this process started is still up: the joining driver only left it.
    assert ray.is_initialized()
    assert ray.cluster_resources()["CPU"] == 2.0  # type: ignore[no-untyped-call]


def test_every_listener_of_the_cluster_is_on_the_loopback_address(ray_cluster: str) -> None:
    @ray.remote
    def ping() -> int:
        return os.getpid()

    worker = ray.get(ping.remote())
    cluster = descendants(os.getpid())
    assert worker in cluster
    found = listeners(cluster)
    assert found, "the cluster listens somewhere"
    for pid, addresses in found.items():
        for address in addresses:
            host = ipaddress.ip_address(address.rsplit(":", 1)[0])
            mapped = getattr(host, "ipv4_mapped", None)
            assert host.is_loopback or (mapped is not None and mapped.is_loopback), (pid, address)


async def test_a_worker_killed_under_dsh_fleet_run_leaves_only_results_on_stdout(
    tmp_path: Path, ray_cluster: str
) -> None:
    """Ray's driver reports the dead worker (``A worker died or was killed …``): on
    stderr, never among the results (``dsh fleet run … > results.jsonl``)."""
    path = fleet_deployment(tmp_path, extra=RAY)
    block(tmp_path / "control", "b")
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"id": "blocked", "prompt": "block b"}, *answer_tasks(2)]
    )
    args = ["fleet", "run", str(path), str(tasks), "--engine", "ray", "--address", ray_cluster]
    driver = await anyio.open_process([sys.executable, "-m", "dsh", *args])
    exited = anyio.Event()
    out: list[bytes] = []
    err: list[bytes] = []

    async def drain(stream: Any, into: list[bytes]) -> None:
        into.extend([chunk async for chunk in stream])

    async def watch() -> None:
        async with anyio.create_task_group() as streams:
            streams.start_soon(drain, driver.stdout, out)
            streams.start_soon(drain, driver.stderr, err)
        await driver.wait()
        exited.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        pid = await blocked_pid(tmp_path / "control" / "fifo", exited)
        assert pid is not None
        assert pid != driver.pid  # a worker process
        os.kill(pid, signal.SIGKILL)
    stderr = b"".join(err).decode()
    assert "its worker died" in stderr
    # Every line a result, and every task done: the retry waited for the worker to be
    # back rather than spending its retries on "the actor is restarting".
    results = [json.loads(line) for line in b"".join(out).decode().splitlines()]
    assert all(isinstance(r, dict) and set(r) == set(RESULT_KEYS) for r in results), stderr
    assert sorted((r["task"], r["stop_reason"]) for r in results) == [
        ("blocked", "completed"),
        ("t1", "completed"),
        ("t2", "completed"),
    ], stderr
    assert next(r["output"] for r in results if r["task"] == "blocked") == "resumed"
    assert driver.returncode == 0, stderr
