"""The fleet in one process (the local engine): one session per task, reconciling with
the store, fencing the older of two attempts, engines, and what the store says."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh import Context, load_deployment
from dsh.testing import Mark, ScriptedModel, Wait, capture_logs, text
from dsh_fleet import (
    ATTEMPT_EVENT,
    RESUME_PROMPT,
    EngineOptions,
    Fleet,
    FleetError,
    Job,
    LocalEngine,
    Task,
    TaskResult,
    result_of,
    state_of,
    usage_of,
)
from dsh_llm import Message, TextBlock, ToolCallBlock
from dsh_session import Session, SessionEvent, SessionFencedError, SessionHeader, Sessions
from tests.plugins.fleet.fleet_support import (
    STORES,
    USAGE,
    answer_tasks,
    ends,
    fleet_deployment,
    loaded,
    snapshot,
    types_of,
    write_tasks,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def local(fleet: Fleet, path: Path, concurrency: int = 4) -> Any:
    return fleet.engine("local", EngineOptions(path, concurrency))


# -- many tasks --------------------------------------------------------------------------


async def test_fifty_tasks_complete_with_one_session_each(tmp_path: Path, store: str) -> None:
    path = fleet_deployment(tmp_path, store=store)
    tasks = write_tasks(tmp_path / "tasks.jsonl", answer_tasks(50))
    async with loaded(path) as (root, fleet):
        jobs = fleet.plan(fleet.read_tasks(tasks), path)
        arrived: list[TaskResult] = []
        results = await fleet.run(jobs, local(fleet, path, 8), on_result=arrived.append)
        assert sorted(r.task for r in arrived) == sorted(r.task for r in results)
        assert [r.to_json() for r in results] == [
            {
                "task": f"t{n}",
                "session": fleet.session_id(path, f"t{n}"),
                "output": f"answer: answer {n}",
                "stop_reason": "completed",
                "usage": USAGE,
            }
            for n in range(1, 51)
        ]
        stored = root.sessions.stored()
        assert sorted(s.id for s in stored) == sorted(job.session for job in jobs)
        first = await snapshot(fleet, jobs[0].session)
        assert types_of(first)[0] == ATTEMPT_EVENT
        assert first.events[0].data == {"turn": 0, "epoch": 1, "task": "t1"}
        assert ends(first) == ["completed"]
        assert first.header.meta == {"agent": "fleet:t1", "model": "fleet-mock", "task": "t1"}
        assert first.header.cwd == str(Path.cwd())
        # Run again: everything is finished, so nothing runs and nothing is written.
        before = [types_of(await snapshot(fleet, job.session)) for job in jobs]
        skipped: list[TaskResult] = []
        again = await fleet.run(
            jobs, local(fleet, path), on_result=arrived.append, on_skip=skipped.append
        )
        assert again == results == skipped
        assert len(arrived) == 50
        assert [types_of(await snapshot(fleet, job.session)) for job in jobs] == before
        assert await fleet.run(jobs, local(fleet, path)) == results
        assert root.agents.list() == [root.agents.get("main")]  # every task's agent is gone


# -- reconciling with the store ------------------------------------------------------------


def user(session: Session, turn: int, words: str) -> None:
    session.append("user/message", {"turn": turn, "message": Message.user(words).to_json()})


def answer(session: Session, turn: int, words: str, **extra: Any) -> None:
    message = Message("assistant", (TextBlock(words),))
    data = {"turn": turn, "step": 1, "message": message.to_json(), **extra}
    session.append("assistant/message", data)


def end(session: Session, turn: int, kind: str) -> None:
    session.append("turn/end", {"turn": turn, "reason": {"kind": kind}})


def left_open(session: Session) -> None:
    session.append("turn/start", {"turn": 1})
    user(session, 1, "tool x")
    session.append("step/start", {"turn": 1, "step": 1})
    call = ToolCallBlock("c1", "echo", '{"text": "x"}')
    message = Message("assistant", (call,))
    session.append("assistant/message", {"turn": 1, "step": 1, "message": message.to_json()})
    session.append(
        "tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "echo", "arguments": "{}"}
    )


def ended(kind: str, output: str | None = None) -> Any:
    def build(session: Session) -> None:
        session.append("turn/start", {"turn": 1})
        user(session, 1, "answer 1")
        if output is not None:
            answer(session, 1, output)
        end(session, 1, kind)

    return build


def twice_interrupted(session: Session) -> None:
    ended("interrupted", "partial")(session)
    session.append("turn/start", {"turn": 2})
    user(session, 2, RESUME_PROMPT)
    end(session, 2, "interrupted")


#: Sessions written by hand (task id -> how), and what a re-run makes of them.
STORED = {
    "done": ended("completed", "the old answer"),
    "failed": ended("error"),
    "open": left_open,
    "silent": ended("interrupted"),
    "aborted": ended("aborted"),
    "twice": twice_interrupted,
}


async def test_a_rerun_skips_finished_resumes_unfinished_and_creates_missing(
    tmp_path: Path, store: str
) -> None:
    path = fleet_deployment(tmp_path, store=store)
    prompts = {"open": "tool x", "missing": "answer new"}
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": t, "prompt": prompts.get(t, "answer 1")} for t in [*STORED, "missing"]],
    )
    async with loaded(path) as (root, fleet):
        jobs = fleet.plan(fleet.read_tasks(tasks), path)
        for job in jobs[:-1]:
            session = root.sessions.create(job.session, cwd="/w", meta={"task": job.task})
            STORED[job.task](session)
    async with loaded(path) as (root, fleet):
        status = await fleet.status(jobs)
        assert [(s.task, s.state, s.stop_reason) for s in status] == [
            ("done", "done", "completed"),
            ("failed", "failed", "error"),
            ("open", "running", None),
            ("silent", "running", "interrupted"),
            ("aborted", "running", "aborted"),
            ("twice", "running", "interrupted"),
            ("missing", "pending", None),
        ]
        skipped: list[TaskResult] = []
        results = await fleet.run(jobs, local(fleet, path), on_skip=skipped.append)
        assert [r.task for r in skipped] == ["done", "failed"]
        assert {r.task: (r.stop_reason, r.output) for r in results} == {
            "done": ("completed", "the old answer"),
            "failed": ("error", None),
            "open": ("completed", "resumed"),
            "silent": ("completed", "answer: answer 1"),
            "aborted": ("completed", "answer: answer 1"),
            "twice": ("completed", "resumed"),
            "missing": ("completed", "answer: answer new"),
        }
        logs = {job.task: await snapshot(fleet, job.session) for job in jobs}
        assert {task: ends(session) for task, session in logs.items()} == {
            "done": ["completed"],
            "failed": ["error"],
            "open": ["interrupted", "completed"],
            "silent": ["interrupted", "completed"],
            "aborted": ["aborted", "completed"],
            "twice": ["interrupted", "interrupted", "completed"],
            "missing": ["completed"],
        }
        # The open turn was closed by the attempt that resumed it, after its marker.
        opened = types_of(logs["open"])
        assert opened[opened.index(ATTEMPT_EVENT) :][:4] == [
            ATTEMPT_EVENT,
            "tool/result",
            "step/end",
            "turn/end",
        ]
        closing = logs["open"].events[opened.index("tool/result")].data
        assert closing["code"] == "TOOL_OUTCOME_UNKNOWN"
        # A turn the model never saw is sent again, a seen one continued.
        sent = {
            task: [m.text for m in session.derive_messages() if m.role == "user"]
            for task, session in logs.items()
        }
        assert sent["silent"] == sent["aborted"] == ["answer 1"]
        assert sent["open"] == ["tool x", RESUME_PROMPT]
        assert sent["twice"] == ["answer 1", RESUME_PROMPT]
        assert (await fleet.status(jobs))[-1].state == "done"


# -- two attempts at once ------------------------------------------------------------------


async def test_two_attempts_at_once_the_older_is_fenced(tmp_path: Path, store: str) -> None:
    path = fleet_deployment(tmp_path, store=store)
    reached, release = anyio.Event(), anyio.Event()
    older_model = ScriptedModel(
        [*text("older ")[:2], Mark(reached), Wait(release), *text("older answer")[1:]]
    )
    newer_model = ScriptedModel("newer answer")
    job = Job("race", "race-1", "answer race", "scripted", str(tmp_path))
    async with loaded(path) as (older_root, older), loaded(path) as (newer_root, newer):
        older_model.install(older_root)
        newer_model.install(newer_root)
        outcome: list[BaseException | TaskResult] = []

        async def older_attempt() -> None:
            try:
                outcome.append(await older.run_job(job))
            except SessionFencedError as exc:
                outcome.append(exc)

        with capture_logs("dsh", logging.WARNING) as logs:
            async with anyio.create_task_group() as tg:
                tg.start_soon(older_attempt)
                await reached.wait()  # the older attempt streams its answer
                result = await newer.run_job(job)  # a retry while the older one runs
                release.set()
        assert result.to_json() == {
            "task": "race",
            "session": "race-1",
            "output": "newer answer",
            "stop_reason": "completed",
            "usage": None,
        }
        [fenced] = outcome
        assert isinstance(fenced, SessionFencedError)
        assert fenced.code == "SESSION_FENCED"
        assert "lease (epoch 1) is no longer the store's (epoch 2)" in str(fenced)
        assert any("a newer attempt took the session over" in m for m in logs.messages())
        stored = await snapshot(newer, "race-1")
    kinds = types_of(stored)
    marks = [i for i, kind in enumerate(kinds) if kind == ATTEMPT_EVENT]
    assert [stored.events[i].data["epoch"] for i in marks] == [1, 2]
    # Nothing of the older attempt after the newer one's mark: its answer never landed.
    assert all(m.text != "older answer" for m in stored.derive_messages())
    assert ends(stored) == ["interrupted", "completed"]
    assert [e.seq for e in stored.events] == list(range(len(stored.events)))


async def test_a_job_the_store_refuses_is_a_failed_result(tmp_path: Path, store: str) -> None:
    path = fleet_deployment(tmp_path, store=store)
    tasks = write_tasks(tmp_path / "tasks.jsonl", answer_tasks(2))
    async with loaded(path) as (_, fleet):
        jobs = fleet.plan(fleet.read_tasks(tasks), path)
        async with loaded(path) as (other, _):
            held = other.sessions.create(jobs[0].session)  # a plain writer holds it
            held.append("turn/start", {"turn": 1})
            user(held, 1, "answer 1")
            results = await fleet.run(jobs, local(fleet, path))
    failed, fine = results
    assert (failed.stop_reason, failed.output, failed.usage) == ("error", None, None)
    assert failed.error is not None
    assert failed.error.startswith("SessionInUseError: ")
    assert failed.to_json() == {
        "task": "t1",
        "session": jobs[0].session,
        "output": None,
        "stop_reason": "error",
        "usage": None,
    }
    assert fine.stop_reason == "completed"


async def test_a_job_whose_cwd_is_gone_where_it_runs_fails_before_anything_is_stored(
    tmp_path: Path,
) -> None:
    path = fleet_deployment(tmp_path)
    (tmp_path / "repo").mkdir()
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "a", "prompt": "x", "cwd": "repo"}])
    async with loaded(path) as (_, fleet):
        [job] = fleet.plan(fleet.read_tasks(tasks), path)
        (tmp_path / "repo").rmdir()  # removed since the file was read, or another machine
        [result] = await fleet.run([job], local(fleet, path))
        assert result.error == (
            f'FleetError: task "a": its cwd "{tmp_path}/repo" is not a folder here (on '
            f"{socket.gethostname()}): nothing ran"
        )
        assert await fleet.ctx.sessions.snapshot(job.session) is None


async def test_a_session_finished_meanwhile_is_only_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fleet_deployment(tmp_path)
    tasks = write_tasks(tmp_path / "tasks.jsonl", answer_tasks(1))
    async with loaded(path) as (_, fleet):
        [job] = fleet.plan(fleet.read_tasks(tasks), path)
        first = await fleet.run_job(job)
        before = types_of(await snapshot(fleet, job.session))
        assert await fleet.run_job(job) == first  # a finished session is only read

        async def unseen(self: Sessions, session_id: str) -> None:
            return None  # as if it finished after this attempt looked

        monkeypatch.setattr(Sessions, "snapshot", unseen)
        assert await fleet.run_job(job) == first
        monkeypatch.undo()
        assert types_of(await snapshot(fleet, job.session)) == before


# -- engines -------------------------------------------------------------------------------


class FakeEngine:
    def __init__(self, options: EngineOptions) -> None:
        self.options = options

    async def dispatch(self, jobs: Any, *, on_result: Any = None) -> list[TaskResult]:
        return [TaskResult(j.task, j.session, "fake", "completed", None) for j in jobs]


async def test_engines_come_from_plugins_and_leave_with_them(tmp_path: Path) -> None:
    path = fleet_deployment(tmp_path)
    async with loaded(path) as (root, fleet):
        assert fleet.engines() == ["local"]
        engine = local(fleet, path, 3)
        assert isinstance(engine, LocalEngine)
        assert repr(engine) == "<LocalEngine concurrency=3>"

        def offer(ctx: Context, config: None) -> object:
            return ctx.fleet.register_engine("fake", FakeEngine)

        fiber = await root.plugin(offer)
        assert fleet.engines() == ["fake", "local"]
        made = fleet.engine("fake", EngineOptions(path, 2, "somewhere"))
        assert isinstance(made, FakeEngine)
        assert made.options.address == "somewhere"
        for name in ("local", "fake"):
            with pytest.raises(FleetError, match=f'the fleet engine "{name}" is already'):
                fleet.register_engine(name, FakeEngine)
        for bad in ("two words", "", 3):
            with pytest.raises(FleetError, match="an engine name must be a plain word"):
                fleet.register_engine(bad, FakeEngine)  # type: ignore[arg-type]
        await fiber.dispose()
        assert fleet.engines() == ["local"]
        with pytest.raises(FleetError, match='unknown fleet engine "fake"; known engines: local'):
            fleet.engine("fake", EngineOptions(path, 2))
        with pytest.raises(FleetError, match="--address names a cluster to join"):
            fleet.engine("local", EngineOptions(path, 2, "127.0.0.1:1"))
        results = await LocalEngine(fleet.run_job, 1).dispatch([])
        assert results == []


async def test_the_fleet_needs_persistence_that_takes_leases(tmp_path: Path) -> None:
    path = fleet_deployment(tmp_path)
    text_of = path.read_text().splitlines()
    bare = path.with_name("bare.yml")
    bare.write_text("\n".join(line for line in text_of if "session-" not in line) + "\n")
    async with loaded(bare) as (_, fleet):
        jobs = fleet.plan([Task("a", "answer")], bare)
        with pytest.raises(FleetError, match="the fleet needs session persistence"):
            await fleet.run(jobs, local(fleet, bare))
        with pytest.raises(FleetError, match="the fleet needs session persistence"):
            await fleet.status(jobs)


async def test_unloading_the_fleet_leaves_nothing_behind(tmp_path: Path) -> None:
    path = fleet_deployment(tmp_path)
    async with Context() as root:
        deployment = await load_deployment(path, root)
        fleet: Fleet = root.fleet
        assert ATTEMPT_EVENT in root.sessions.event_types()
        await deployment.instance.fibers["fleet"].dispose()
        assert root.get("fleet") is None
        assert ATTEMPT_EVENT not in root.sessions.event_types()
        assert fleet.engines() == ["local"]  # nothing was registered with it


async def test_the_default_model(tmp_path: Path) -> None:
    one = fleet_deployment(tmp_path / "one")
    named = fleet_deployment(tmp_path / "named", fleet="{model: other}")
    async with loaded(one) as (_, fleet):
        assert fleet.default_model() == "fleet-mock"
        [job] = fleet.plan([Task("a", "answer", "/w", None)], one)
        assert (job.model, job.cwd) == ("fleet-mock", "/w")
    async with loaded(named) as (_, fleet):
        assert fleet.default_model() == "other"
    async with loaded(one) as (root, fleet):
        root.agents.create("second", model=None)
        assert fleet.default_model() is None
        with pytest.raises(FleetError, match='task "a" has no model and the fleet has none'):
            fleet.plan([Task("a", "answer")], one)


# -- what a result reads from a session ---------------------------------------------------


def events(*items: tuple[str, dict[str, Any]]) -> list[SessionEvent]:
    return [SessionEvent(seq, kind, 1.0, data) for seq, (kind, data) in enumerate(items)]


def test_usage_sums_the_steps_and_skips_what_is_malformed() -> None:
    message = Message("assistant", (TextBlock("hi"),)).to_json()
    steps = Session(
        SessionHeader("s", 1.0),
        events(
            ("assistant/message", {"turn": 1, "step": 1, "message": message, "usage": USAGE}),
            ("usage/step", {"turn": 1, "step": 1, "usage": {**USAGE, "cache_read_tokens": 4}}),
            ("usage/step", {"turn": 1, "step": 2, "usage": {"input_tokens": -1}}),
            ("usage/step", {"turn": 1, "step": 3, "usage": "lots"}),
            ("usage/step", {"turn": 1, "step": 4, "usage": {**USAGE, "reasoning_tokens": 1}}),
        ),
    )
    assert usage_of(steps) == {
        "input_tokens": 20,
        "output_tokens": 4,
        "cache_read_tokens": 4,
        "reasoning_tokens": 1,
    }
    messages = Session(
        SessionHeader("s", 1.0),
        events(
            ("assistant/message", {"turn": 1, "step": 1, "message": message, "usage": USAGE}),
            ("assistant/message", {"turn": 1, "step": 2, "message": message}),
        ),
    )
    assert usage_of(messages) == USAGE
    empty = Session(SessionHeader("s", 1.0))
    assert usage_of(empty) is None
    assert state_of(empty) == "running"
    job = Job("t", "s", "p", "m", "/")
    assert result_of(job, empty) == TaskResult("t", "s", None, None, None)


def test_jobs_and_results_cross_as_plain_json() -> None:
    job = Job("t", "s", "p", "m", "/w")
    assert Job.from_json(json.loads(json.dumps(job.to_json()))) == job
    result = TaskResult("t", "s", "out", "completed", USAGE)
    data = json.loads(json.dumps(result.to_json()))
    assert TaskResult.from_json(data) == result
    assert TaskResult.from_json(data, "why").error == "why"
    assert TaskResult.failed(job, "gone") == TaskResult("t", "s", None, "error", None, "gone")
