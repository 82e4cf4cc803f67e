"""The history compaction sends: a session's turns indexed as they are logged, their
tool results pruned, cut at the newest checkpoint."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from dsh_llm import Block, Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock, Usage
from dsh_session import ChunkRun, Session, message_of

__all__ = [
    "CHECKPOINT_EVENT",
    "PREAMBLE",
    "History",
    "Plan",
    "message_chars",
    "prompt_tokens",
    "prune",
    "summary_message",
]

#: The session event a compaction appends: ``{"summary", "first_kept_seq", "usage"?}``.
CHECKPOINT_EVENT = "compaction/checkpoint"

#: The first line of the message that stands for the compacted turns.
PREAMBLE = (
    "This conversation was compacted: the summary below stands for its earlier part, "
    "and the messages after this one follow on from it unchanged."
)


def summary_message(summary: str) -> Message:
    """The user message that opens a compacted history."""
    return Message.user(f"{PREAMBLE}\n\n<compacted-summary>\n{summary}\n</compacted-summary>")


def message_chars(message: Message) -> int:
    """The characters of ``message`` that reach the model (the size estimate is this
    divided by 4): text, reasoning, tool names and arguments, tool results."""
    chars = 0
    for block in message.content:
        if isinstance(block, TextBlock | ReasoningBlock):
            chars += len(block.text)
        elif isinstance(block, ToolCallBlock):
            chars += len(block.name) + len(block.arguments)
        else:
            chars += len(block.content)
    return chars


def prune(message: Message, limit: int | None) -> Message:
    """``message`` with each tool result longer than ``limit`` characters cut to its
    first and last ``limit // 2`` characters around a marker (``message`` itself when
    nothing is that long, or without a limit)."""
    if limit is None or not any(
        isinstance(b, ToolResultBlock) and len(b.content) > limit for b in message.content
    ):
        return message
    half = limit // 2
    blocks: list[Block] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock) and len(block.content) > limit:
            content = block.content
            cut = len(content) - 2 * half
            marker = f"\n[... {cut:,} characters of this tool result cut here ...]\n"
            kept = content[:half] + marker + content[len(content) - half :]
            blocks.append(ToolResultBlock(block.tool_call_id, kept, block.is_error))
        else:
            blocks.append(block)
    return Message(message.role, tuple(blocks))


def prompt_tokens(usage: Usage) -> int:
    """The size of the prompt a step sent: input, cache-read and cache-write tokens."""
    return usage.input_tokens + (usage.cache_read_tokens or 0) + (usage.cache_write_tokens or 0)


@dataclass(slots=True)
class Turn:
    """One turn the history keeps (or messages recorded outside a turn: ``number`` None)."""

    number: int | None
    #: The seq of its ``turn/start`` (of its message, outside a turn).
    start: int
    messages: list[Message] = field(default_factory=list)
    chars: int = 0
    answered: bool = False

    def add(self, message: Message) -> None:
        self.messages.append(message)
        self.chars += message_chars(message)
        self.answered = self.answered or message.role == "assistant"


@dataclass(frozen=True, slots=True)
class Plan:
    """A compaction to run: ``turns[first:kept]`` (with the summary, if any) become the
    new summary; what starts at ``first_kept_seq`` stays."""

    first: int
    kept: int
    first_kept_seq: int
    #: The numbers of the turns summarised (messages outside a turn have none).
    summarised: tuple[int, ...]
    #: The numbers of the turns kept as they are (the current one included).
    retained: tuple[int, ...]
    #: Whether an earlier summary is summarised again.
    resummarised: bool


class History:
    """The compacted history of one session, kept up to date from its log.

    :meth:`sync` reads the rows appended to the session's log since the previous call
    (a packed run of chunks is passed over whole: chunks add no message). A turn's messages
    follow :meth:`Session.derive_messages` (a turn that ended without completing
    before the model answered leaves nothing); a turn's tool results are pruned when
    it ends, so the turn in progress is sent whole. The newest ``compaction/checkpoint``
    cuts the history: its summary, then the turns from ``first_kept_seq`` on.
    """

    __slots__ = (
        "_flat",
        "_kept",
        "_offsets",
        "_open",
        "_prune_over",
        "_scanned",
        "_starts",
        "first_kept_seq",
        "prompt_tokens",
        "summary",
        "turns",
    )

    def __init__(self, prune_over: int | None) -> None:
        self._prune_over = prune_over
        self._scanned = 0
        #: The turns that ended and are kept, in log order.
        self.turns: list[Turn] = []
        self._starts: list[int] = []
        #: Their messages (pruned), one list; ``_offsets[i]`` is where turn i begins.
        self._flat: list[Message] = []
        self._offsets: list[int] = []
        self._open: Turn | None = None
        #: The newest checkpoint's summary (None before any) and where it cut.
        self.summary: str | None = None
        self.first_kept_seq = 0
        #: The index in :attr:`turns` of the first turn after the cut.
        self._kept = 0
        #: The prompt size of the last step recorded after the newest checkpoint.
        self.prompt_tokens: int | None = None

    def sync(self, session: Session) -> None:
        """Read the events appended to ``session`` since the previous call."""
        rows = session.events.rows()
        count = len(rows)
        for i in range(self._scanned, count):
            event = rows[i]
            if isinstance(event, ChunkRun):
                continue
            kind = event.type
            data = event.data
            if kind == "turn/start":
                self._open = Turn(data["turn"], event.seq)
            elif kind == "turn/end":
                turn = self._open
                if turn is not None and (turn.answered or data["reason"]["kind"] == "completed"):
                    self._close(turn)
                self._open = None
            elif kind == "usage/step":
                self.prompt_tokens = prompt_tokens(Usage.from_json(data["usage"]))
            elif kind == CHECKPOINT_EVENT:
                self.summary = data["summary"]
                self.first_kept_seq = data["first_kept_seq"]
                self._kept = bisect.bisect_left(self._starts, self.first_kept_seq)
                self.prompt_tokens = None
            else:
                message = message_of(event)
                if message is None:
                    continue
                if self._open is not None:
                    self._open.add(message)
                else:  # recorded outside a turn: kept on its own
                    alone = Turn(None, event.seq)
                    alone.add(message)
                    self._close(alone)
        self._scanned = count

    def _close(self, turn: Turn) -> None:
        messages = [prune(m, self._prune_over) for m in turn.messages]
        turn.messages = messages
        turn.chars = sum(map(message_chars, messages))
        self.turns.append(turn)
        self._starts.append(turn.start)
        self._offsets.append(len(self._flat))
        self._flat.extend(messages)

    @property
    def current(self) -> Turn | None:
        """The turn in progress (its ``turn/start`` is logged, its end is not)."""
        return self._open

    def _offset(self, index: int) -> int:
        return self._offsets[index] if index < len(self._offsets) else len(self._flat)

    def messages(self) -> tuple[Message, ...]:
        """What the next request carries: the summary message (after a checkpoint), the
        turns kept since, pruned, and the turn in progress."""
        head = () if self.summary is None else (summary_message(self.summary),)
        tail = () if self._open is None else self._open.messages
        start = self._offset(self._kept)
        kept = self._flat[start:] if start else self._flat  # one copy fewer without a cut
        return (*head, *kept, *tail)

    def plan(self, budget_chars: float, next_seq: int) -> Plan | None:
        """What compacting now would summarise, or None when nothing would be: the
        longest run of whole recent turns whose size is at most ``budget_chars``
        (always with the turn in progress) stays; the turns before it since the last
        cut are summarised. ``next_seq`` is the seq the session's next event gets."""
        first = self._kept
        current = self._open
        total = 0 if current is None else current.chars
        kept = len(self.turns)
        while kept > first and total + self.turns[kept - 1].chars <= budget_chars:
            kept -= 1
            total += self.turns[kept].chars
        if kept == first:
            return None
        retained = [t.number for t in self.turns[kept:]]
        if current is not None:
            retained.append(current.number)
        if kept < len(self.turns):
            first_kept_seq = self.turns[kept].start
        else:
            first_kept_seq = next_seq if current is None else current.start
        return Plan(
            first,
            kept,
            first_kept_seq,
            tuple(t.number for t in self.turns[first:kept] if t.number is not None),
            tuple(n for n in retained if n is not None),
            self.summary is not None,
        )

    def summary_input(self, plan: Plan) -> list[Message]:
        """The messages ``plan`` summarises: the earlier summary, then its turns."""
        head = [] if self.summary is None else [summary_message(self.summary)]
        return [*head, *self._flat[self._offset(plan.first) : self._offset(plan.kept)]]
