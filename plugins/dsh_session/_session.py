"""A session: the append-only event log of one agent, and the history derived from it."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh import DshError, InFlight
from dsh_llm import Message, ToolResultBlock

__all__ = [
    "COMMIT_EVENTS",
    "EVENT_TYPE",
    "EVENT_TYPES",
    "Session",
    "SessionError",
    "SessionEvent",
    "SessionHeader",
    "message_of",
]

#: Every event type a session records (the data of each is in the README).
EVENT_TYPES = frozenset(
    {
        "turn/start",  # {turn}
        "turn/end",  # {turn, reason: {kind, ...}}
        "step/start",  # {turn, step}
        "step/end",  # {turn, step}
        "user/message",  # {turn, step, message}
        "assistant/chunk",  # {turn, step, chunk}
        "assistant/message",  # {turn, step, message, usage?, interrupted?}
        "tool/call",  # {turn, step, call_id, name, arguments}
        "tool/result",  # {turn, step, call_id, name, content, is_error, code?}
        "request/header",  # {turn, step, header: {model, tools, system?, max_tokens?}}
    }
)

#: Grammar of an event type a plugin declares (``todo/write``): lower-case words joined
#: by ``/``, at least two. Always apply it with ``fullmatch``.
EVENT_TYPE = re.compile(r"[a-z][a-z0-9_-]*(?:/[a-z][a-z0-9_-]*)+")

#: No declared types: a session outside the store records only the built-in ones.
_NONE_DECLARED: Collection[str] = frozenset()

#: The events that commit state: persistence makes each durable before going on.
COMMIT_EVENTS = frozenset(
    {"user/message", "assistant/message", "tool/call", "tool/result", "turn/end"}
)

#: The content of the result given to a tool call that a crash left unanswered.
_UNKNOWN_OUTCOME = (
    "Error: the session was interrupted while this tool call ran; its outcome is unknown"
)
_NOT_STARTED = "Error: the session was interrupted before this tool call started"


class SessionError(DshError, ValueError):
    """A session was misused: an unknown event type, a duplicate id, a bad stored log."""

    code = "SESSION"


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One record of the log; ``seq`` counts from 0 without gaps, ``time`` is epoch seconds."""

    seq: int
    type: str
    time: float
    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "time": self.time, "data": self.data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionEvent:
        return cls(data["seq"], data["type"], data["time"], data["data"])


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """What a session is: its id, when it began and the agent's working directory."""

    id: str
    created_at: float
    cwd: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "created_at": self.created_at}
        if self.cwd is not None:
            data["cwd"] = self.cwd
        if self.meta:
            data["meta"] = dict(self.meta)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionHeader:
        return cls(data["id"], data["created_at"], data.get("cwd"), data.get("meta", {}))


class Session:
    """The log of one agent: append events, read them back, derive the history.

    ``events`` must be contiguous (``events[i].seq == i``). ``on_append`` is called
    after each append; the ``Sessions`` store sets it to publish ``session/event``
    while the session is live in the store.
    """

    __slots__ = (
        "_answered",
        "_declared",
        "_derived",
        "_last_turn",
        "_messages",
        "_on_append",
        "_open",
        "events",
        "header",
        "writing",
    )

    def __init__(
        self,
        header: SessionHeader,
        events: list[SessionEvent] | None = None,
        on_append: Callable[[Session, SessionEvent], None] | None = None,
    ) -> None:
        self.header = header
        self.events: list[SessionEvent] = events if events is not None else []
        for seq, event in enumerate(self.events):
            if event.seq != seq:
                raise SessionError(
                    f'session "{header.id}" log is not contiguous: event {seq} has seq {event.seq}'
                )
        self._on_append = on_append
        #: The event types plugins declared (set by the store while the session is in it).
        self._declared = _NONE_DECLARED
        #: Work appending to this session now (the agent loop holds it for each turn):
        #: whoever persists the session waits for it before letting go of the session.
        self.writing = InFlight()
        # The history of the turns that ended, and the messages of the turn in progress
        # (None outside a turn): see derive_messages.
        self._messages: list[Message] = []
        self._open: list[Message] | None = None
        self._answered = False
        self._derived = 0
        self._last_turn = 0
        for event in self.events:
            if event.type == "turn/start":
                self._last_turn = event.data["turn"]

    @property
    def id(self) -> str:
        return self.header.id

    def __repr__(self) -> str:
        return f"<Session {self.id!r} ({len(self.events)} events)>"

    def append(self, type: str, data: Mapping[str, Any]) -> SessionEvent:
        """Record one event and publish it; returns the event.

        ``data`` must be JSON-compatible and is kept as given (do not mutate it
        afterwards). A ``type`` that is neither built in (:data:`EVENT_TYPES`) nor
        declared by a plugin (``sessions.declare_event_types``, while the session is in
        the store) raises :class:`SessionError` and records nothing. An error of a
        ``session/event`` listener propagates after the event is recorded.
        """
        if type not in EVENT_TYPES and type not in self._declared:
            known = ", ".join(sorted({*EVENT_TYPES, *self._declared}))
            raise SessionError(f'unknown session event type "{type}"; known types: {known}')
        event = SessionEvent(len(self.events), type, time.time(), data)
        self.events.append(event)
        if type == "turn/start":
            self._last_turn = data["turn"]
        if self._on_append is not None:
            self._on_append(self, event)
        return event

    def derive_messages(self) -> list[Message]:
        """The model-facing history (a fresh list): user messages, assistant messages
        with content, and one ``tool`` message per tool result, in log order.

        A turn's user messages go to the model only with what the model made of them
        (``docs/rfc/0009``): a turn that ended without completing (``error``,
        ``aborted``, ``blocked``, ``interrupted``) before the model produced anything
        leaves nothing in the history, so a refused request is not sent again with
        every later one; a turn that broke after some output keeps its user messages,
        every step that completed and the interrupted text of the one that broke. The
        log keeps everything either way.

        Incremental: each call reads only the events appended since the last one.
        """
        events = self.events
        for event in events[self._derived :]:
            kind = event.type
            if kind == "turn/start":
                self._open = []
                self._answered = False
            elif kind == "turn/end":
                if self._open is not None and (
                    self._answered or event.data["reason"]["kind"] == "completed"
                ):
                    self._messages.extend(self._open)
                self._open = None
            else:
                message = _message_of(event)
                if message is None:
                    continue
                if self._open is None:  # recorded outside a turn
                    self._messages.append(message)
                else:
                    self._open.append(message)
                    self._answered = self._answered or message.role == "assistant"
        self._derived = len(events)
        if self._open:
            return [*self._messages, *self._open]
        return list(self._messages)

    def unanswered(self, turn: int) -> list[Message]:
        """The user messages of ``turn`` that the history leaves out: those of a turn
        that ended without completing before the model produced anything (empty for
        a turn that completed, got output, or has not ended)."""
        start = next(
            (e.seq for e in self.events if e.type == "turn/start" and e.data["turn"] == turn),
            None,
        )
        reason = self.turn_end(turn)
        if start is None or reason is None or reason["kind"] == "completed":
            return []
        users: list[Message] = []
        for event in itertools.takewhile(lambda e: e.type != "turn/end", self.events[start:]):
            message = _message_of(event)
            if message is not None and message.role == "assistant":
                return []
            if message is not None and message.role == "user":
                users.append(message)
        return users

    def last_turn(self) -> int:
        """The number of the latest turn that started (0 before any)."""
        return self._last_turn

    def turn_end(self, turn: int) -> Mapping[str, Any] | None:
        """The ``reason`` of turn ``turn``'s end, or None while it is open (or unknown)."""
        for event in reversed(self.events):
            if event.type == "turn/end" and event.data["turn"] == turn:
                reason: Mapping[str, Any] = event.data["reason"]
                return reason
        return None

    def close_open_turn(self) -> bool:
        """Close the last turn if it has no ``turn/end`` (the process died during it).

        Each tool call of the turn without a result gets an error result (code
        ``TOOL_OUTCOME_UNKNOWN`` when its ``tool/call`` was logged, else
        ``TOOL_NOT_STARTED``), an open step gets its ``step/end`` and the turn ends
        with reason ``{"kind": "interrupted"}``. The turn's events are kept. Returns
        True when it closed a turn.
        """
        turn = self._last_turn
        if turn == 0 or self.turn_end(turn) is not None:
            return False
        start = max(e.seq for e in self.events if e.type == "turn/start" and e.data["turn"] == turn)
        step = 0
        step_open = False
        # call id -> (step, name, whether its tool/call was logged), in model order.
        unanswered: dict[str, tuple[int, str, bool]] = {}
        for event in self.events[start:]:
            data = event.data
            if event.type == "step/start":
                step, step_open = data["step"], True
            elif event.type == "step/end":
                step_open = False
            elif event.type == "assistant/message" and not data.get("interrupted"):
                for call in Message.from_json(data["message"]).tool_calls:
                    unanswered[call.id] = (data["step"], call.name, False)
            elif event.type == "tool/call":
                unanswered[data["call_id"]] = (data["step"], data["name"], True)
            elif event.type == "tool/result":
                unanswered.pop(data["call_id"], None)
        for call_id, (call_step, name, logged) in unanswered.items():
            self.append(
                "tool/result",
                {
                    "turn": turn,
                    "step": call_step,
                    "call_id": call_id,
                    "name": name,
                    "content": _UNKNOWN_OUTCOME if logged else _NOT_STARTED,
                    "is_error": True,
                    "code": "TOOL_OUTCOME_UNKNOWN" if logged else "TOOL_NOT_STARTED",
                },
            )
        if step_open:
            self.append("step/end", {"turn": turn, "step": step})
        self.append("turn/end", {"turn": turn, "reason": {"kind": "interrupted"}})
        return True


def _message_of(event: SessionEvent) -> Message | None:
    kind = event.type
    if kind == "user/message":
        return Message.from_json(event.data["message"])
    if kind == "assistant/message":
        message = Message.from_json(event.data["message"])
        return message if message.content else None
    if kind == "tool/result":
        data = event.data
        block = ToolResultBlock(data["call_id"], data["content"], data["is_error"])
        return Message("tool", (block,))
    return None


def message_of(event: SessionEvent) -> Message | None:
    """The history message one event contributes, or None: a ``user/message``'s
    message, an ``assistant/message``'s unless its content is empty, a ``tool`` message
    for a ``tool/result``; other types contribute nothing. Which turns' messages the
    history keeps is :meth:`Session.derive_messages`'s rule."""
    return _message_of(event)
