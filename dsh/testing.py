"""Test support for dsh plugins: a scripted model, bounded waits and log capture.

Everything the project's own tests use to drive plugins on a real runtime, published
for plugin authors (the README's "Testing your plugin" shows a whole test)::

    model = ScriptedModel(tool_calls(tool_call("shout", {"text": "hi"})), text("done"))
    async with dsh.Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        await root.plugin(Shout)
        assert await run_turn(root.agents.get("main"), "shout hi") == {"kind": "completed"}

The scripted model speaks the chunk vocabulary of the ``dsh_llm`` plugin package. The
runtime itself never depends on a plugin, so this module loads ``dsh_llm`` only when
a test builds a reply or streams one (see ``docs/rfc/0007``).
"""

from __future__ import annotations

import importlib
import json
import logging
import textwrap
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import anyio

from ._context import Context
from ._disposer import Disposer
from ._fiber import Fiber, FiberState

__all__ = [
    "CapturedLogs",
    "Mark",
    "Reply",
    "ScriptedModel",
    "ToolCallSpec",
    "Wait",
    "capture_logs",
    "errors_logged",
    "failure",
    "run_turn",
    "state",
    "text",
    "tool_call",
    "tool_calls",
    "until",
    "write_deployment",
]


def _llm() -> ModuleType:
    """The ``dsh_llm`` package, imported when a test first scripts a model."""
    return importlib.import_module("dsh_llm")


# -- waiting and reading state ----------------------------------------------------------


async def until(condition: Callable[[], object], *, limit: int = 1000) -> None:
    """Yield to the scheduler until ``condition()`` is true, at most ``limit`` times.

    Never sleeps: each round is one checkpoint, so what other tasks can do without
    waiting for time or I/O happens first. Raises ``AssertionError`` when the
    condition still fails after ``limit`` rounds.
    """
    for _ in range(limit):
        if condition():
            return
        await anyio.lowlevel.checkpoint()
    raise AssertionError(f"the condition never became true ({limit} checkpoints)")


def state(fiber: Fiber) -> FiberState:
    """``fiber.state`` read afresh (a type checker keeps an earlier narrowing of the
    attribute across an ``await``; a call it cannot narrow)."""
    return fiber.state


async def run_turn(agent: Any, message: Any) -> Mapping[str, Any] | None:
    """Send ``message`` to ``agent``, wait until it is idle and return how the turn it
    started ended (the ``reason`` of its ``turn/end``; None when it never ran)."""
    await agent.when_idle()
    turn = agent.session.last_turn() + 1
    agent.send(message)
    await agent.when_idle()
    reason: Mapping[str, Any] | None = agent.session.turn_end(turn)
    return reason


def write_deployment(directory: Path, yaml_text: str, name: str = "dsh.yml") -> Path:
    """Write ``yaml_text`` (dedented) to ``directory/name`` and return the path."""
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(yaml_text), encoding="utf-8")
    return path


# -- logs -------------------------------------------------------------------------------


class _HasRecords(Protocol):
    @property
    def records(self) -> list[logging.LogRecord]: ...


@dataclass
class CapturedLogs:
    """The records a :func:`capture_logs` block saw, oldest first."""

    records: list[logging.LogRecord] = field(default_factory=list)

    def messages(self, level: int = logging.DEBUG) -> list[str]:
        """The formatted messages of the records at ``level`` or above."""
        return [r.getMessage() for r in self.records if r.levelno >= level]


class _Collect(logging.Handler):
    def __init__(self, into: CapturedLogs) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.records.append(record)


@contextmanager
def capture_logs(name: str = "dsh", level: int = logging.DEBUG) -> Iterator[CapturedLogs]:
    """Collect the records of logger ``name`` (and its children) at ``level`` or above.

    The handler sits on the logger itself, so it sees records however propagation
    and the root logger are configured; the logger's level is restored afterwards.
    """
    captured = CapturedLogs()
    logger = logging.getLogger(name)
    handler = _Collect(captured)
    saved = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield captured
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)


def errors_logged(logs: _HasRecords) -> list[logging.LogRecord]:
    """The ERROR (and worse) records of ``logs``: pytest's ``caplog`` or a
    :class:`CapturedLogs`."""
    return [r for r in logs.records if r.levelno >= logging.ERROR]


# -- the scripted model -----------------------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """In a reply: hold the stream here until ``event`` is set."""

    event: anyio.Event


@dataclass(frozen=True)
class Mark:
    """In a reply: set ``event`` when the stream gets here."""

    event: anyio.Event


@dataclass(frozen=True)
class ToolCallSpec:
    """One tool call of a scripted reply (build it with :func:`tool_call`)."""

    name: str
    arguments: str
    id: str | None = None


#: What a scripted reply may be: a string (a text answer), a sequence of
#: ``dsh_llm`` chunks mixed with :class:`Wait` and :class:`Mark`, or a function of the
#: request returning one of those.
Reply = str | Sequence[Any] | Callable[[Any], Any]


def text(
    *parts: str, usage: tuple[int | None, ...] | None = None, finish: str = "stop"
) -> list[Any]:
    """A text answer: one delta per part, then ``usage`` when given, then the finish.

    ``usage`` holds the fields of ``dsh_llm.Usage`` in order: input and output tokens,
    then optionally cache-read, cache-write and reasoning tokens."""
    llm = _llm()
    chunks: list[Any] = [
        llm.BlockStart(0, "text"),
        *(llm.TextDelta(0, part) for part in parts),
        llm.BlockEnd(0),
    ]
    if usage is not None:
        chunks.append(llm.UsageChunk(llm.Usage(*usage)))
    chunks.append(llm.Finish(finish))
    return chunks


def tool_call(
    name: str, arguments: Mapping[str, Any] | str = "{}", *, id: str | None = None
) -> ToolCallSpec:
    """One call of tool ``name``; ``arguments`` is a dict (sent as JSON) or raw text.
    Without ``id`` the call's id is ``call-<turn>-<step>-<n>`` of the request."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCallSpec(name, raw, id)


def tool_calls(
    *calls: ToolCallSpec, before: str = "", usage: tuple[int | None, ...] | None = None
) -> Callable[[Any], list[Any]]:
    """An answer calling tools (in this order), optionally after some text; ``usage``
    as in :func:`text`."""

    def reply(request: Any) -> list[Any]:
        llm = _llm()
        chunks: list[Any] = []
        if before:
            chunks += [llm.BlockStart(0, "text"), llm.TextDelta(0, before), llm.BlockEnd(0)]
        first = len(chunks) // 3
        for n, call in enumerate(calls):
            index = first + n
            call_id = call.id or f"call-{request.turn}-{request.step}-{n + 1}"
            chunks += [
                llm.BlockStart(index, "tool-call"),
                llm.ToolCallDelta(index, call_id, call.arguments, name=call.name),
                llm.BlockEnd(index),
            ]
        if usage is not None:
            chunks.append(llm.UsageChunk(llm.Usage(*usage)))
        chunks.append(llm.Finish("tool-calls"))
        return chunks

    return reply


def failure(message: str, code: str, *, aborted: bool = False) -> list[Any]:
    """A call that fails at once with ``code`` (``Finish("error")``, or
    ``Finish("aborted")`` with ``aborted``)."""
    llm = _llm()
    return [llm.Finish("aborted" if aborted else "error", llm.LlmFailure(message, code))]


class ScriptedModel:
    """A model adapter that answers each call with the next reply of its script.

    ``replies`` (and later :meth:`reply`) queue answers, one per call; when the queue
    is empty, ``respond(request)`` answers, and without it the call fails with an
    ``AssertionError`` naming the request (which the ``llm`` service turns into an
    ``ADAPTER_ERROR`` turn end). Every request is kept in :attr:`requests`. Each chunk
    is preceded by a checkpoint, as a real model's I/O would be. With ``window`` it
    declares that context window (tokens) for every model it serves
    (:meth:`context_window`).
    """

    def __init__(
        self,
        *replies: Reply,
        respond: Callable[[Any], Reply] | None = None,
        models: Sequence[str] = ("scripted",),
        window: int | None = None,
    ) -> None:
        self.script: deque[Reply] = deque(replies)
        self.respond = respond
        self.models = list(models)
        self.window = window
        self.requests: list[Any] = []

    def context_window(self, model: str) -> int | None:
        """The declared context window of ``model`` (``window``, for every model)."""
        return self.window

    def reply(self, *replies: Reply) -> None:
        """Queue more answers."""
        self.script.extend(replies)

    def install(self, ctx: Context, models: Sequence[str] | None = None) -> Disposer:
        """Serve ``models`` (default: :attr:`models`) through ``ctx.llm``; returns the
        exact disposer of the adapter registration."""
        registered: Disposer = ctx.llm.register_adapter(list(models or self.models), self)
        return registered

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        self.requests.append(request)
        if self.script:
            reply: Any = self.script.popleft()
        elif self.respond is not None:
            reply = self.respond
        else:
            raise AssertionError(
                f"unscripted model call: turn {request.turn}, step {request.step} of "
                f"session {request.session_id}"
            )
        while callable(reply):
            reply = reply(request)
        items = text(reply) if isinstance(reply, str) else reply
        for item in items:
            await anyio.lowlevel.checkpoint()
            if isinstance(item, Wait):
                await item.event.wait()
            elif isinstance(item, Mark):
                item.event.set()
            else:
                yield item
