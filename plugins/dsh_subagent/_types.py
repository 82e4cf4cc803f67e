"""The records of the subagent registry: a request, a run, its result and a provider."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

import anyio

__all__ = [
    "CAPABILITIES",
    "StopReason",
    "SubagentOutcome",
    "SubagentProvider",
    "SubagentRequest",
    "SubagentResult",
    "SubagentRun",
]

#: What a provider may support beyond a plain run.
CAPABILITIES = frozenset({"persona", "tool_filter", "depth_limit"})

StopReason: TypeAlias = Literal["completed", "aborted", "error", "max-tokens", "refusal"]


@dataclass(frozen=True)
class SubagentRequest:
    """What to delegate, and to whom: ``parent`` is the delegating agent's handle.

    ``persona`` shadows the deployment persona for the child, ``tool_filter``
    (``{"allow": [...], "deny": [...]}``) restricts its tools, ``max_depth`` caps how
    deep delegation may nest, ``model`` overrides the parent's model.
    """

    prompt: str
    parent: Any
    persona: str | None = None
    tool_filter: Mapping[str, Any] | None = None
    max_depth: int | None = None
    model: str | None = None


@dataclass(frozen=True)
class SubagentResult:
    """How a run ended: the child's last assistant text, why it stopped, and what went
    wrong when it did not complete."""

    output: str
    stop_reason: StopReason
    diagnostic: str | None = None


class SubagentOutcome:
    """The result of a run, set once; ``await outcome`` waits for it and may be done any
    number of times, by any number of waiters."""

    __slots__ = ("_callbacks", "_done", "_result")

    def __init__(self) -> None:
        self._done = anyio.Event()
        self._result: SubagentResult | None = None
        self._callbacks: list[Callable[[SubagentResult], None]] = []

    @property
    def done(self) -> bool:
        return self._result is not None

    def set(self, result: SubagentResult) -> None:
        """Settle the run and call the callbacks (later calls are ignored: the first
        result stands)."""
        if self._result is not None:
            return
        self._result = result
        self._done.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(result)

    def add_callback(self, callback: Callable[[SubagentResult], None]) -> None:
        """Call ``callback(result)`` when the run settles (at once if it has)."""
        if self._result is not None:
            callback(self._result)
        else:
            self._callbacks.append(callback)

    def __await__(self) -> Generator[Any, None, SubagentResult]:
        return self._wait().__await__()

    async def _wait(self) -> SubagentResult:
        await self._done.wait()
        assert self._result is not None
        return self._result


@dataclass
class SubagentRun:
    """One started child: ``id`` names it (``send_message``, notices), ``agent`` is its
    handle, ``result`` its :class:`SubagentOutcome` (await it, any number of times)."""

    id: str
    agent: Any
    result: SubagentOutcome
    #: The name of the provider that started it (set by the registry).
    provider: str = ""


class SubagentProvider(Protocol):
    """Something that can run a child agent for a request."""

    name: str
    #: A subset of :data:`CAPABILITIES`.
    capabilities: frozenset[str]
    #: True when the child sees the parent's conversation (its completed turns).
    inherits_parent_context: bool

    def start(self, request: SubagentRequest) -> SubagentRun | Awaitable[SubagentRun]:
        """Start a child for ``request``."""
        ...
