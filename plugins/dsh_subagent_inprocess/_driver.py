"""Running a subagent in this process: a child agent of the parent, on a session the
driver builds (empty, or seeded with the parent's completed turns)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio

from dsh import Disposer, Plugin
from dsh_session import Session, SessionEvent, SessionHeader
from dsh_subagent import (
    SubagentOutcome,
    SubagentRequest,
    SubagentResult,
    SubagentRun,
    delegation_depth,
    stop_reason_of,
)

__all__ = [
    "DESCRIPTOR_EVENT",
    "InProcessProvider",
    "completed_turns",
    "provider_plugin",
    "result_of",
    "start_in_process",
]


#: The session event a child records in its first turn: ``{turn, provider,
#: parent_agent, parent_session}``.
DESCRIPTOR_EVENT = "subagent/descriptor"


def completed_turns(session: Session) -> list[SessionEvent]:
    """The events of ``session`` up to and including its last ``turn/end``: every
    completed turn, nothing of a turn still in flight."""
    events = session.events
    for last in range(len(events) - 1, -1, -1):
        if events[last].type == "turn/end":
            return events[: last + 1]
    return []


def result_of(session: Session, turn: int, seed_length: int) -> SubagentResult:
    """How the child's run ended: its turn ``turn``'s end and its last assistant text
    after the seed."""
    reason = session.turn_end(turn)
    stop = stop_reason_of(reason)
    output = ""
    for event in reversed(session.events[seed_length:]):
        if event.type == "assistant/message":
            content = event.data["message"]["content"]
            text = "".join(b["text"] for b in content if b.get("type") == "text")
            if text.strip():
                output = text
                break
    diagnostic: str | None = None
    if reason is None or (stop == "aborted" and reason.get("reason") == "disposed"):
        # Whether the turn recorded its end before the child's disposal settled the run
        # depends on task order: one wording for both.
        diagnostic = "the subagent was disposed before its run ended"
    elif stop == "aborted" and reason.get("reason") == "user":
        diagnostic = "the subagent's turn was cancelled"
    elif stop != "completed":
        message = reason.get("message") or reason.get("reason")
        code = reason.get("code")
        diagnostic = " ".join(
            part for part in (str(message) if message else "", f"({code})" if code else "") if part
        ) or str(reason.get("kind"))
    return SubagentResult(output, stop, diagnostic)


async def start_in_process(
    request: SubagentRequest, *, provider: str, inherit: bool
) -> SubagentRun:
    """Start a child of ``request.parent`` (through ``parent.ctx.agents``, so the
    parent's scope owns it), send it the prompt, and return the run; the run's result
    settles when the child's first turn ends (or the child is disposed)."""
    parent: Any = request.parent
    seed = completed_turns(parent.session) if inherit else []
    agents = parent.ctx.agents
    child_id = _free_id(agents, provider)
    model = request.model or parent.model
    session = Session(
        SessionHeader(
            uuid.uuid4().hex,
            time.time(),
            parent.cwd,
            {
                "agent": child_id,
                "model": model,
                "parent_session": parent.session.id,
                "origin": "subagent",
                "delegation_depth": delegation_depth(parent) + 1,
                "seed_length": len(seed),
            },
        ),
        list(seed),
    )
    child = agents.create(
        child_id,
        model=model,
        persona=request.persona,
        session=session,
        max_tokens=parent.max_tokens,
    )
    try:
        if request.tool_filter is not None:
            child.ctx.tools.restrict(
                allow=request.tool_filter.get("allow"), deny=request.tool_filter.get("deny")
            )
        outcome = SubagentOutcome()
        turn = session.last_turn() + 1

        async def describe(
            agent: Any, messages: list[Any], at_turn: int, step: int, call_next: Any
        ) -> Any:
            # Recorded inside the child's first turn, before its first step: where the
            # child came from, for whoever reads its log later.
            if at_turn == turn and step == 1:
                session.append(
                    DESCRIPTOR_EVENT,
                    {
                        "turn": turn,
                        "provider": provider,
                        "parent_agent": parent.id,
                        "parent_session": parent.session.id,
                    },
                )
            return await call_next()

        child.ctx.on("agent/pre-step", describe)

        async def settle() -> None:
            try:
                await child.when_idle()
            finally:
                # Disposed mid-turn: let the turn record its end (and the partial
                # answer) first; the same disposal is cancelling it.
                with anyio.CancelScope(shield=True):
                    await session.writing.idle()
                outcome.set(result_of(session, turn, len(seed)))

        child.send(request.prompt)
        child.ctx.task(settle, label=f"subagent {child_id}")
    except BaseException:
        await child.dispose()  # nothing half-started stays
        raise
    return SubagentRun(child_id, child, outcome)


def _free_id(agents: Any, provider: str) -> str:
    while True:
        candidate = f"{provider}-{uuid.uuid4().hex[:8]}"
        if agents.get(candidate) is None:
            return candidate


class InProcessProvider:
    """A :class:`dsh_subagent.SubagentProvider` running children in this process; it
    supports every capability (a persona, a tool filter, a depth limit)."""

    capabilities = frozenset({"persona", "tool_filter", "depth_limit"})

    def __init__(self, name: str, *, inherits_parent_context: bool) -> None:
        self.name = name
        self.inherits_parent_context = inherits_parent_context

    def __repr__(self) -> str:
        return f"<InProcessProvider {self.name!r}>"

    async def start(self, request: SubagentRequest) -> SubagentRun:
        return await start_in_process(
            request, provider=self.name, inherit=self.inherits_parent_context
        )


def provider_plugin(provider: str, *, inherits_parent_context: bool, name: str) -> type[Plugin]:
    """A plugin class (YAML ``name``) that registers the in-process provider
    ``provider`` with the ``subagents`` service while it is active (and declares the
    ``subagent/descriptor`` session event its children record)."""

    def setup(self: Plugin) -> Iterator[Disposer]:
        yield self.ctx.sessions.declare_event_types(DESCRIPTOR_EVENT)
        yield self.ctx.subagents.register_provider(
            InProcessProvider(provider, inherits_parent_context=inherits_parent_context)
        )

    namespace = {
        "name": name,
        # It declares a session event type as well as registering the provider.
        "inject": ("subagents", "sessions"),
        "setup": setup,
        "__doc__": (
            f"Registers the subagent provider ``{provider}`` "
            f"(``inherits_parent_context={inherits_parent_context}``)."
        ),
    }
    return type(f"Subagent{provider.title()}", (Plugin,), namespace)
