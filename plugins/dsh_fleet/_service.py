"""The ``Fleet`` service: many sessions, one per task, with the session log as the truth."""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from dsh import Context, Disposer, Service
from dsh_llm import LlmFormatError, Message, Usage
from dsh_session import Session, SessionFencedError

from ._engine import Engine, EngineFactory, EngineOptions, Job, LocalEngine, TaskResult
from ._errors import FleetError
from ._tasks import Task, read_tasks, session_id_for

__all__ = [
    "ATTEMPT_EVENT",
    "FINISHED",
    "RESUME_PROMPT",
    "STATES",
    "Fleet",
    "FleetConfig",
    "TaskStatus",
    "result_of",
    "state_of",
    "usage_of",
]

#: The session event a fleet attempt starts with: ``{turn, epoch, task}`` (``turn`` is
#: the last turn before it, ``epoch`` the attempt's lease).
ATTEMPT_EVENT = "fleet/attempt"
#: The words of ``dsh fleet status``, in its order.
STATES = ("done", "running", "failed", "pending")
#: The states a re-run skips.
FINISHED = frozenset({"done", "failed"})
#: What a resumed session is told when its interrupted turn had already reached the
#: model (the default of the ``resume_prompt`` config key).
RESUME_PROMPT = (
    "Your previous turn was interrupted before it finished (the process running it "
    "stopped). Continue the task from where it stopped."
)
_DONE = frozenset({"completed", "max-tokens"})
_FAILED = frozenset({"error", "blocked"})


class FleetConfig(BaseModel):
    """Config of the ``fleet`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: The fleet's name in session ids (default: the deployment file's absolute path).
    #: Set it to keep the ids when the file moves.
    name: str | None = Field(default=None, min_length=1)
    #: The model of a task that names none (default: the model of the deployment's only
    #: declared agent).
    model: str | None = Field(default=None, min_length=1)
    #: The persona of the tasks' agents (default: the deployment's).
    persona: str | None = None
    #: ``max_tokens`` of the tasks' model requests.
    max_tokens: int | None = Field(default=None, gt=0)
    #: How many sessions run at once when the command line does not say.
    concurrency: int = Field(default=4, ge=1)
    #: What a resumed session is told when its interrupted turn reached the model.
    resume_prompt: str = Field(default=RESUME_PROMPT, min_length=1)


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """What the store says of one task's session (``dsh fleet status``)."""

    task: str
    session: str
    #: One of :data:`STATES`.
    state: str
    stop_reason: str | None
    usage: Mapping[str, int] | None


def state_of(session: Session | None) -> str:
    """The :data:`STATES` word of a task whose stored session is ``session``.

    ``pending``: not stored. ``done``: its last turn ended ``completed`` or
    ``max-tokens``. ``failed``: ``error`` or ``blocked``. ``running``: started and not
    finished — a turn is open (a worker runs it, or died in it), it ended
    ``interrupted`` or ``aborted``, or none has started; a re-run resumes it.
    """
    if session is None:
        return "pending"
    last = session.last_turn()
    reason = session.turn_end(last) if last else None
    kind = None if reason is None else reason.get("kind")
    if kind in _DONE:
        return "done"
    if kind in _FAILED:
        return "failed"
    return "running"


def _added(total: Usage | None, more: Usage) -> Usage:
    if total is None:
        return more
    return Usage(
        total.input_tokens + more.input_tokens,
        total.output_tokens + more.output_tokens,
        (total.cache_read_tokens or 0) + (more.cache_read_tokens or 0) or None,
        (total.cache_write_tokens or 0) + (more.cache_write_tokens or 0) or None,
        (total.reasoning_tokens or 0) + (more.reasoning_tokens or 0) or None,
    )


def usage_of(session: Session) -> dict[str, int] | None:
    """The usage the server reported for every model step of ``session`` summed
    (``Usage.to_json()``): the ``usage/step`` events when the session has any (those
    the loop estimated are left out), else the ``usage`` of each ``assistant/message``;
    None when nothing reported any."""
    steps = [
        e.data.get("usage")
        for e in session.events
        if e.type == "usage/step" and not e.data.get("estimated")
    ]
    if not steps:
        steps = [e.data.get("usage") for e in session.events if e.type == "assistant/message"]
    total: Usage | None = None
    for data in steps:
        if not isinstance(data, dict):
            continue
        try:
            total = _added(total, Usage.from_json(data))
        except LlmFormatError:
            continue
    return None if total is None else total.to_json()


def result_of(job: Job, session: Session) -> TaskResult:
    """The result of ``job`` as its session ``session`` records it: the last turn's
    end, the text of the last assistant message of that turn that has text, the usage."""
    last = session.last_turn()
    reason = session.turn_end(last) if last else None
    output: str | None = None
    for event in reversed(session.events):
        if event.type != "assistant/message" or event.data["turn"] != last:
            continue
        text = Message.from_json(event.data["message"]).text
        if text:
            output = text
            break
    return TaskResult(
        job.task,
        job.session,
        output,
        None if reason is None else reason.get("kind"),
        usage_of(session),
    )


class Fleet(Service):
    """Runs one session per task, at least once, wherever an engine puts it (ctx key
    ``fleet``).

    The store decides what runs: a task whose session finished is skipped, one whose
    session is unfinished is resumed, one without a session is created. Every attempt
    takes the session's lease first, so an older attempt still running somewhere is
    fenced off (``dsh_session.Lease``).
    """

    key = "fleet"
    name = "fleet"
    Config = FleetConfig
    inject = ("sessions", "agents", "llm")

    def __init__(self, ctx: Context, config: FleetConfig) -> None:
        super().__init__(ctx, config)
        self._engines: dict[str, EngineFactory] = {}

    def setup(self) -> Iterator[Disposer]:
        yield self.ctx.sessions.declare_event_types(ATTEMPT_EVENT)

    # -- engines ----------------------------------------------------------------------

    def register_engine(self, name: str, factory: EngineFactory) -> Disposer:
        """Offer the engine ``name`` (``dsh fleet run --engine NAME``) while the calling
        plugin lives; returns the exact disposer. ``factory(options)`` makes the engine
        of one run. Raises :class:`FleetError` for ``local`` (built in), a name taken
        or one that is not a plain word."""
        checked: object = name
        if not isinstance(checked, str) or not name.isidentifier():
            raise FleetError(f"an engine name must be a plain word, got {name!r}")
        if name == "local" or name in self._engines:
            raise FleetError(f'the fleet engine "{name}" is already registered')

        def body() -> Callable[[], object]:
            self._engines[name] = factory
            return functools.partial(self._engines.pop, name)

        return self.ctx.effect(body, label=f"fleet engine {name}")

    def engines(self) -> list[str]:
        """The engine names on offer: ``local`` and those plugins registered, sorted."""
        return sorted({"local", *self._engines})

    def engine(self, name: str, options: EngineOptions) -> Engine:
        """The engine ``name`` for one run with ``options``. Raises :class:`FleetError`
        for an unknown name (listing the known ones) and for ``address`` with the local
        engine."""
        if name == "local":
            if options.address is not None:
                raise FleetError(
                    "--address names a cluster to join; the local engine runs in this "
                    "process (use --engine ray)"
                )
            return LocalEngine(self.run_job, options.concurrency)
        factory = self._engines.get(name)
        if factory is None:
            known = ", ".join(self.engines())
            raise FleetError(
                f'unknown fleet engine "{name}"; known engines: {known} (the ray engine '
                "comes with the fleet-ray plugin)"
            )
        return factory(options)

    # -- tasks ------------------------------------------------------------------------

    def default_model(self) -> str | None:
        """The model of a task that names none: the ``model`` config key, else the
        model of the deployment's only agent (None when there is not exactly one)."""
        if self.config.model is not None:
            return str(self.config.model)
        agents = self.ctx.agents.list()
        model = agents[0].model if len(agents) == 1 else None
        return model if isinstance(model, str) else None

    def read_tasks(self, path: Path) -> list[Task]:
        """The tasks of ``path`` checked against this deployment (its models, the
        default model); raises :class:`TaskFileError` (see :func:`read_tasks`)."""
        return read_tasks(path, models=self.ctx.llm.models(), default_model=self.default_model())

    def session_id(self, deployment: Path, task_id: str) -> str:
        """The session id of ``task_id`` in this fleet (named by the ``name`` config
        key, else the absolute path of ``deployment``)."""
        return session_id_for(self.config.name or str(deployment.absolute()), task_id)

    def plan(self, tasks: Sequence[Task], deployment: Path) -> list[Job]:
        """One job per task: its session id, model (the task's, else the default) and
        cwd (the task's, else this process's)."""
        default = self.default_model()
        here = str(Path.cwd())
        jobs: list[Job] = []
        for task in tasks:
            model = task.model or default
            if model is None:
                raise FleetError(f'task "{task.id}" has no model and the fleet has none')
            session_id = self.session_id(deployment, task.id)
            jobs.append(Job(task.id, session_id, task.prompt, model, task.cwd or here))
        return jobs

    # -- the store ----------------------------------------------------------------------

    def _check_persistence(self) -> None:
        events = self.home_ctx.events
        if not events.event("session/lease").listeners():
            raise FleetError(
                "the fleet needs session persistence that takes leases (add "
                "session-jsonl or session-sqlite): the session log is its record"
            )

    async def status(self, jobs: Sequence[Job]) -> list[TaskStatus]:
        """What the store says of each job's session (read only: nothing is locked or
        written)."""
        self._check_persistence()
        found: list[TaskStatus] = []
        for job in jobs:
            stored = await self.ctx.sessions.snapshot(job.session)
            state = state_of(stored)
            if stored is None:
                found.append(TaskStatus(job.task, job.session, state, None, None))
                continue
            result = result_of(job, stored)
            found.append(TaskStatus(job.task, job.session, state, result.stop_reason, result.usage))
        return found

    async def run(
        self,
        jobs: Sequence[Job],
        engine: Engine,
        *,
        on_result: Callable[[TaskResult], object] | None = None,
        on_skip: Callable[[TaskResult], object] | None = None,
    ) -> list[TaskResult]:
        """Reconcile with the store, then dispatch what is left: a job whose session
        finished (:data:`FINISHED`) is skipped (its result read from the store, given
        to ``on_skip``); the others go to ``engine`` (each result to ``on_result``).
        Returns every result in the order of ``jobs``."""
        self._check_persistence()
        results: list[TaskResult | None] = [None] * len(jobs)
        todo: list[int] = []
        for index, job in enumerate(jobs):
            stored = await self.ctx.sessions.snapshot(job.session)
            if stored is None or state_of(stored) not in FINISHED:
                todo.append(index)
                continue
            skipped = results[index] = result_of(job, stored)
            if on_skip is not None:
                on_skip(skipped)
        dispatched = await engine.dispatch([jobs[i] for i in todo], on_result=on_result)
        for index, result in zip(todo, dispatched, strict=True):
            results[index] = result
        return [result for result in results if result is not None]

    # -- one attempt ----------------------------------------------------------------------

    def _messages(self, session: Session, job: Job) -> list[str | Message]:
        """What a resumed (or new) session is sent: the task's prompt while it never
        reached the model, else the user messages the interrupted turn left out of the
        history, else the resume prompt."""
        history = session.derive_messages()
        if not any(message.role == "user" for message in history):
            return [job.prompt]
        left_out: list[str | Message] = list(session.unanswered(session.last_turn()))
        return left_out or [self.config.resume_prompt]

    async def run_job(self, job: Job) -> TaskResult:
        """Run or resume the session of ``job`` here, once: what every engine calls
        (in the worker that loaded this deployment).

        A finished session is only read. Otherwise the session's lease is taken, the
        session created or loaded, a ``fleet/attempt`` event recorded, a turn the last
        attempt left open closed as interrupted, and the messages of
        :meth:`_messages` sent to an agent of the task's model; the result is read from
        the session once the agent is idle. Raises :class:`FleetError` when the job's
        ``cwd`` is not a folder in this process (a worker on another machine, a folder
        removed since the tasks file was read) before anything is stored,
        :class:`dsh_session.SessionFencedError` when a newer attempt took the session
        over meanwhile, and what the store raises (a session another writer holds).
        """
        sessions = self.ctx.sessions
        stored = await sessions.snapshot(job.session)
        if stored is not None and state_of(stored) in FINISHED:
            return result_of(job, stored)
        if not await anyio.Path(job.cwd).is_dir():
            raise FleetError(
                f'task "{job.task}": its cwd "{job.cwd}" is not a folder here (on '
                f"{socket.gethostname()}): nothing ran"
            )
        lease = await sessions.lease(job.session)
        agent_id = f"fleet:{job.task}"
        if lease.stored:
            session = await sessions.load(job.session)
        else:
            meta: dict[str, Any] = {"agent": agent_id, "model": job.model, "task": job.task}
            session = sessions.prepare(job.session, cwd=job.cwd, meta=meta)
        if state_of(session) in FINISHED:  # another attempt finished it meanwhile
            return result_of(job, session)
        agent = self.ctx.agents.create(
            agent_id,
            model=job.model,
            persona=self.config.persona,
            session=session,
            max_tokens=self.config.max_tokens,
        )
        try:
            session.append(
                ATTEMPT_EVENT,
                {"turn": session.last_turn(), "epoch": lease.epoch, "task": job.task},
            )
            session.close_open_turn()
            for message in self._messages(session, job):
                agent.send(message)
            await agent.when_idle()
        finally:
            with anyio.CancelScope(shield=True):
                await agent.dispose()
        if lease.fenced is not None:
            raise SessionFencedError(lease.fenced)
        return result_of(job, session)
