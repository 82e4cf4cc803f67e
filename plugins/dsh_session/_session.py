"""A session: the append-only event log of one agent, and the history derived from it."""

from __future__ import annotations

import builtins
import itertools
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh import InFlight
from dsh_llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    Message,
    ReasoningDelta,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    UsageChunk,
    chunk_to_json,
)

from ._compact import BUILDERS, RESULT_FIELDS, plain_event
from ._event import SessionError, SessionEvent
from ._packed import ChunkRun, EventLog

if TYPE_CHECKING:
    from dsh._events import Event

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

#: The chunk types ``append_chunk`` records.
_CHUNK_TYPES = (BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd, UsageChunk, Finish)
#: The same, as a set of the exact classes (most chunks: no isinstance call).
_CHUNK_CLASSES = frozenset(_CHUNK_TYPES)

#: The event types whose ``data["message"]`` is a message.
_MESSAGE_TYPES = frozenset({"user/message", "assistant/message"})

#: The event types that contribute a message to the history (see ``_message_of``).
_CONTRIBUTE = frozenset({"user/message", "assistant/message", "tool/result"})


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

    ``events`` must be contiguous (``events[i].seq == i``); a list is taken over, an
    :class:`EventLog` (what a persistence backend loads) adopted as it is. The history
    of the events given is derived at once. ``on_append`` is called after each
    append; the ``Sessions`` store sets it to publish ``session/event`` while the
    session is live in the store, together with that event's listeners: it is then
    called only when one of them would hear the event.
    """

    __slots__ = (
        "_answered",
        "_audience",
        "_declared",
        "_derived",
        "_history",
        "_last_turn",
        "_messages",
        "_on_append",
        "_open",
        "_quiet",
        "_quiet_scope",
        "_scope",
        "events",
        "header",
        "writing",
    )

    def __init__(
        self,
        header: SessionHeader,
        events: Sequence[SessionEvent] | None = None,
        on_append: Callable[[Session, SessionEvent], None] | None = None,
    ) -> None:
        self.header = header
        if isinstance(events, EventLog):
            self.events = events
        else:
            given = events if type(events) is list else list(events or ())
            for seq, event in enumerate(given):
                if event.seq != seq:
                    raise SessionError(
                        f'session "{header.id}" log is not contiguous: event {seq} has seq '
                        f"{event.seq}"
                    )
            self.events = EventLog(given)
        self._on_append = on_append
        #: The listeners of ``session/event`` (the store sets it): a chunk's event is
        #: built only when one of them would hear it.
        self._audience: Event | None = None
        #: The scope key of the context that entered the session into the store (its
        #: agent): the store publishes the session's events with ``scope=`` it.
        self._scope: object = None
        #: When nobody heard ``session/event`` last time it was asked: the bus's count
        #: of changes then and the audience, and the scope asked about (compared by
        #: identity, as the bus tells scopes apart; see :meth:`_hears`).
        self._quiet: tuple[int, Event] | None = None
        self._quiet_scope: object = None
        #: The event types plugins declared (set by the store while the session is in it).
        self._declared = _NONE_DECLARED
        #: Work appending to this session now (the agent loop holds it for each turn):
        #: whoever persists the session waits for it before letting go of the session.
        self.writing = InFlight()
        # The history of the turns that ended, and the messages of the turn in progress
        # (None outside a turn); the rows read so far; the history as last built.
        self._messages: tuple[Message, ...] = ()
        self._open: list[Message] | None = None
        self._answered = False
        self._derived = 0
        self._history: tuple[Message, ...] | None = None
        self._last_turn = 0
        self._advance()

    @property
    def id(self) -> str:
        return self.header.id

    def __repr__(self) -> str:
        return f"<Session {self.id!r} ({len(self.events)} events)>"

    def append(
        self, type: str, data: Mapping[str, Any], *, message: Message | None = None
    ) -> SessionEvent:
        """Record one event and publish it; returns the event.

        ``data`` must be JSON-compatible (do not mutate it afterwards; one of a built-in
        shape is kept as its values: RFC 0054). A ``type`` that is neither built in
        (:data:`EVENT_TYPES`) nor declared by a plugin (``sessions.declare_event_types``,
        while the session is in the store) raises :class:`SessionError` and records
        nothing. An error of a ``session/event`` listener propagates after it is recorded.

        ``message``: for a ``user/message`` or ``assistant/message``, the
        :class:`~dsh_llm.Message` that ``data["message"]`` encodes, when the caller has
        it; the history takes it (and the event keeps it) instead of ``data["message"]``.
        ``data["message"]`` may then be ``message`` itself: the session encodes it
        where it is read (or, for data of no built-in shape, at once).
        """
        if type not in EVENT_TYPES and type not in self._declared:
            known = ", ".join(sorted({*EVENT_TYPES, *self._declared}))
            raise SessionError(f'unknown session event type "{type}"; known types: {known}')
        log = self.events
        seq = log._len
        build = BUILDERS[tuple(data)] if builtins.type(data) is dict else plain_event
        event = build(seq, type, time.time(), data, message)  # compact data (RFC 0054)
        rows = log._rows
        run = rows[-1] if rows else None
        if builtins.type(run) is ChunkRun:  # an event after a run of chunks closes it
            run.close()
            if message is not None and run._packs and type == "assistant/message":
                # The step's deltas and its answer hold the same text: keep it once.
                run.share(_texts(message))
        rows.append(event)
        log._len = seq + 1
        if type == "turn/start":
            self._last_turn = data["turn"]
        on_append = self._on_append
        if on_append is not None:
            audience = self._audience
            # Not when nobody heard it last time and nothing changed since (``_quiet``).
            if audience is None or (
                (
                    self._quiet != (audience.bus.changes, audience)
                    or self._quiet_scope is not self._scope
                )
                and self._hears(audience)
            ):
                on_append(self, event)
        return event

    def _hears(self, audience: Event) -> bool:
        """Whether a listener of ``audience`` hears this session's scope; when none
        does, that is remembered in ``_quiet`` until the bus's listeners change."""
        if audience.heard(self._scope):
            return True
        self._quiet = (audience.bus.changes, audience)
        self._quiet_scope = self._scope
        return False

    def append_chunk(self, turn: int, step: int, chunk: Chunk) -> None:
        """Record one chunk of the stream of ``(turn, step)``: an ``assistant/chunk``
        event with data ``{turn, step, chunk: chunk_to_json(chunk)}``, kept packed
        with the other chunks of the step (see :class:`EventLog`).

        While the session is in the store the event is published as ``session/event``
        like any other, when a listener would hear it; its ``time`` is the one the log
        keeps (to the millisecond within the step). Raises :class:`SessionError` for
        an object that is not a ``dsh_llm`` chunk, recording nothing.
        """
        if type(chunk) not in _CHUNK_CLASSES and not isinstance(chunk, _CHUNK_TYPES):
            raise SessionError(f"append_chunk() takes a dsh_llm chunk, got {chunk!r}")
        log = self.events
        seq = log._len
        rows = log._rows
        run = rows[-1] if rows else None
        if type(run) is ChunkRun and run.open and run.turn == turn and run.step == step:
            log._len = seq + 1  # the open run of the step takes it (most chunks)
            when = run.add(chunk, time.time())
        else:
            when = log._add_chunk(turn, step, chunk, time.time())
        on_append = self._on_append
        if on_append is None:
            return
        audience = self._audience
        if audience is not None and (
            (self._quiet == (audience.bus.changes, audience) and self._quiet_scope is self._scope)
            or not self._hears(audience)
        ):
            return
        data = {"turn": turn, "step": step, "chunk": chunk_to_json(chunk)}
        on_append(self, SessionEvent(seq, "assistant/chunk", when, data))

    def _advance(self) -> None:
        """Fold the rows appended since the last call into the history."""
        rows = self.events._rows
        count = len(rows)
        if self._derived == count:
            return
        ended: list[Message] = []  # what joins the ended turns' history
        start = None  # the last turn/start
        for i in range(self._derived, count):
            event = rows[i]
            if builtins.type(event) is ChunkRun:
                continue
            kind = event.type  # type: ignore[union-attr]  # a plain event
            if kind == "turn/start":
                self._open = []
                self._answered = False
                start = event
            elif kind == "turn/end":
                if self._open is not None and (
                    self._answered or event._value("reason")["kind"] == "completed"  # type: ignore[union-attr]
                ):
                    ended.extend(self._open)
                self._open = None
            elif kind in _CONTRIBUTE:
                message = _message_of(event)  # type: ignore[arg-type]  # a plain event
                if message is None or (kind == "assistant/message" and not message.content):
                    continue
                if self._open is None:  # recorded outside a turn
                    ended.append(message)
                else:
                    self._open.append(message)
                    self._answered = self._answered or message.role == "assistant"
        if ended:
            self._messages = (*self._messages, *ended)
        if start is not None:
            self._last_turn = start._value("turn")  # type: ignore[union-attr]  # a plain event
        self._derived = count
        self._history = None

    def history(self) -> tuple[Message, ...]:
        """The model-facing history as a tuple (the one :meth:`derive_messages`
        describes), the same object until an event changes it."""
        self._advance()
        history = self._history
        if history is None:
            # Between turns the history is the ended turns' tuple itself (kept once).
            opened = self._open
            history = self._history = (*self._messages, *opened) if opened else self._messages
        return history

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

        Incremental: the history of the events a session starts with is derived when
        it is made, and each call reads only the events appended since the last one
        (a message handed to :meth:`append` is taken as it is, not decoded again).
        """
        return list(self.history())

    def _plain(self, start: int = 0) -> Iterator[SessionEvent]:
        """The plain events (not the packed chunks) from row ``start`` on."""
        rows = self.events._rows
        for i in range(start, len(rows)):
            row = rows[i]
            if builtins.type(row) is not ChunkRun:
                yield row  # type: ignore[misc]  # a plain event

    def _turn_start_row(self, turn: int) -> int | None:
        """The row of the last ``turn/start`` of ``turn``."""
        rows = self.events._rows
        for i in range(len(rows) - 1, -1, -1):
            row = rows[i]
            if (
                builtins.type(row) is not ChunkRun
                and row.type == "turn/start"  # type: ignore[union-attr]
                and row._value("turn") == turn  # type: ignore[union-attr]
            ):
                return i
        return None

    def unanswered(self, turn: int) -> list[Message]:
        """The user messages of ``turn`` that the history leaves out: those of a turn
        that ended without completing before the model produced anything (empty for
        a turn that completed, got output, or has not ended)."""
        start = self._turn_start_row(turn)
        reason = self.turn_end(turn)
        if start is None or reason is None or reason["kind"] == "completed":
            return []
        users: list[Message] = []
        for event in itertools.takewhile(lambda e: e.type != "turn/end", self._plain(start)):
            message = _message_of(event)
            if message is not None and message.role == "assistant" and message.content:
                return []
            if message is not None and message.role == "user":
                users.append(message)
        return users

    def last_turn(self) -> int:
        """The number of the latest turn that started (0 before any)."""
        return self._last_turn

    def turn_end(self, turn: int) -> Mapping[str, Any] | None:
        """The ``reason`` of turn ``turn``'s end, or None while it is open (or unknown)."""
        for row in reversed(self.events._rows):
            if (
                builtins.type(row) is not ChunkRun
                and row.type == "turn/end"  # type: ignore[union-attr]
                and row._value("turn") == turn  # type: ignore[union-attr]
            ):
                reason: Mapping[str, Any] = row._value("reason")  # type: ignore[union-attr]
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
        start = self._turn_start_row(turn)
        assert start is not None  # _last_turn is the turn of a turn/start
        step = 0
        step_open = False
        # call id -> (step, name, whether its tool/call was logged), in model order.
        unanswered: dict[str, tuple[int, str, bool]] = {}
        for event in self._plain(start):
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


def _texts(message: Message) -> list[str]:
    """The strings of ``message``'s blocks a model stream builds from deltas."""
    return [
        block.arguments if isinstance(block, ToolCallBlock) else getattr(block, "text", "")
        for block in message.content
    ]


def _message_of(event: SessionEvent) -> Message | None:
    kind = event.type
    if kind in _MESSAGE_TYPES:
        return event._kept_message()
    if kind == "tool/result":
        try:
            call_id, content, is_error = RESULT_FIELDS(event)
        except AttributeError:  # data of no shape kept as slots (with "arguments", say)
            value = event._value
            call_id, content, is_error = value("call_id"), value("content"), value("is_error")
        return Message("tool", (ToolResultBlock(call_id, content, is_error),))
    return None


def message_of(event: SessionEvent) -> Message | None:
    """The history message one event contributes, or None: a ``user/message``'s
    message, an ``assistant/message``'s unless its content is empty, a ``tool`` message
    for a ``tool/result``; other types contribute nothing. Which turns' messages the
    history keeps is :meth:`Session.derive_messages`'s rule."""
    message = _message_of(event)
    if message is not None and message.role == "assistant" and not message.content:
        return None
    return message
