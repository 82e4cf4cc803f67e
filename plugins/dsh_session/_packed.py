"""The event log of a session, with the chunks of each model stream packed.

One event per stream chunk (``assistant/chunk``) would cost an object, two dicts and a
float per chunk, hundreds of bytes for a few characters of text. The chunks a session
records with ``Session.append_chunk`` are kept in a :class:`ChunkRun` instead: the
deltas of one block as one string plus a length each, a millisecond offset per chunk,
and the few other chunks (block starts and ends, usage, the finish) as they came. Every
chunk keeps its own ``seq``: reading the log (``events[i]``, iteration, slices) builds
the ``assistant/chunk`` event of a packed chunk on demand, equal every time.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from dsh_llm import Chunk, ReasoningDelta, TextDelta, ToolCallDelta, chunk_to_json

from ._counts import LIMITS, Counts, counts, narrowest, pack
from ._event import SessionError, SessionEvent

__all__ = ["CHUNKS_ROW", "DELTA_KEYS", "ChunkRun", "EventLog"]

#: The row type of a packed run in a stored log (it never appears among the events).
CHUNKS_ROW = "assistant/chunks"

#: The chunk types whose text is packed, and the key that holds the text.
DELTA_KEYS = {
    "text-delta": "text",
    "reasoning-delta": "text",
    "tool-call-delta": "arguments_delta",
}


class _Deltas:
    """Consecutive deltas of one block: the pieces while open, then one string and
    the length of each piece but the last (:func:`~._counts.pack`)."""

    __slots__ = ("count", "index", "kind", "lengths", "parts", "text")

    def __init__(self, kind: str, index: int, first: str) -> None:
        self.kind = kind
        self.index = index
        self.parts: list[str] | None = [first]
        self.text = ""
        self.lengths: Counts = b""
        self.count = 0  # of the pieces, once joined

    def close(self) -> None:
        """Join the pieces (the segment must be open: the last of an open run)."""
        parts: list[str] = self.parts  # type: ignore[assignment]  # open, see above
        self.text = "".join(parts)
        self.lengths = pack(list(map(len, parts[:-1])))  # the last piece: the rest of the text
        self.count = len(parts)
        self.parts = None

    def __len__(self) -> int:
        return len(self.parts) if self.parts is not None else self.count

    def chunk(self, piece: str) -> dict[str, Any]:
        # The key order of chunk_to_json: index, the text, type.
        return {"index": self.index, DELTA_KEYS[self.kind]: piece, "type": self.kind}

    def pieces(self) -> Iterator[str]:
        if self.parts is not None:
            yield from self.parts
            return
        text, start = self.text, 0
        for length in counts(self.lengths, self.count - 1):
            yield text[start : start + length]
            start += length
        yield text[start:]

    def piece(self, i: int) -> str:
        if self.parts is not None:
            return self.parts[i]
        lengths = counts(self.lengths, self.count - 1)
        start = sum(itertools.islice(lengths, i))
        return self.text[start : start + next(lengths, len(self.text))]  # the last: the rest


#: A member of a run that is not a packed delta: the chunk, or its JSON form (loaded).
_Single = Chunk | Mapping[str, Any]


def _json_of(single: _Single) -> Mapping[str, Any]:
    return single if isinstance(single, Mapping) else chunk_to_json(single)


class ChunkRun:
    """Chunks of one model step, packed; member ``k`` has seq ``seq0 + k``.

    A run is *open* while it is the last row of its session's log: chunks of the same
    step recorded then join it. Any other event recorded after it closes it, and so
    does a persistence backend writing it; the next chunk starts a new run.
    """

    __slots__ = (
        "_count",
        "_gaps",
        "_packs",
        "_segments",
        "_total",
        "open",
        "seq0",
        "step",
        "time0",
        "turn",
    )

    def __init__(self, seq0: int, time0: float, turn: int, step: int) -> None:
        self.seq0 = seq0
        self.time0 = time0
        self.turn = turn
        self.step = step
        self.open = True
        self._count = 0
        #: Milliseconds from the member before to each member (0 for the first): an
        #: array while the run is open (most fit in a byte), packed when it closes.
        #: Member ``k`` is at ``time0 + sum(gaps[: k + 1]) / 1000``.
        self._gaps: Counts = array("B")
        self._total = 0
        self._segments: list[_Deltas | _Single] = []
        #: Whether a segment packs deltas (only such a run has texts to share).
        self._packs = False

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        state = "open" if self.open else "closed"
        return f"<ChunkRun seq {self.seq0}+{self._count} {state}>"

    # -- recording ------------------------------------------------------------------------

    def _stamp(self, gap: int) -> None:
        gaps: array[int] = self._gaps  # type: ignore[assignment]  # open: an array
        if gap >= LIMITS.get(gaps.typecode, gap + 1):
            gaps = self._gaps = array(narrowest(gap), gaps)
        gaps.append(gap)
        self._total += gap

    def _at(self, total: int) -> float:
        return self.time0 + total / 1000 if total else self.time0

    def add(self, chunk: Chunk, when: float) -> float:
        """Record ``chunk``, received at ``when``; returns the time it is kept with
        (``when`` to the millisecond, counted from the run's first chunk)."""
        total = self._total
        gap = round((when - self.time0) * 1000) - total if self._count else 0
        if gap <= 0:  # the first member, or a clock that went back: kept in order
            self._gaps.append(0)  # type: ignore[union-attr]  # open: an array
        elif gap < 0x100:  # most gaps: a byte, whatever the array's type code
            self._gaps.append(gap)  # type: ignore[union-attr]  # open: an array
            total = self._total = total + gap
        else:
            self._stamp(gap)
            total = self._total
        kind = type(chunk)
        if kind is TextDelta or kind is ReasoningDelta:
            text: object = chunk.text  # type: ignore[union-attr]  # a delta, checked above
        elif kind is ToolCallDelta and chunk.id is None and chunk.name is None:  # type: ignore[union-attr]
            text = chunk.arguments_delta  # type: ignore[union-attr]  # checked above
        else:
            text = None
        if type(text) is str:
            self._delta(chunk.type, chunk.index, text)  # type: ignore[union-attr]
        else:  # as _single does (without the call: most chunks of a step)
            segments = self._segments
            if segments and type(segments[-1]) is _Deltas:
                segments[-1].close()
            segments.append(chunk)
            self._count += 1
        return self.time0 + total / 1000 if total else self.time0

    def _delta(self, kind: str, index: int, text: str) -> None:
        segments = self._segments
        last = segments[-1] if segments else None
        if type(last) is _Deltas:  # open: the last segment of an open run
            if last.kind == kind and last.index == index:
                last.parts.append(text)  # type: ignore[union-attr]  # open
                self._count += 1
                return
            last.close()
        segments.append(_Deltas(kind, index, text))
        self._packs = True
        self._count += 1

    def _single(self, single: _Single) -> None:
        segments = self._segments
        if segments and type(segments[-1]) is _Deltas:
            segments[-1].close()
        segments.append(single)
        self._count += 1

    def close(self) -> None:
        """Take no more chunks; the open deltas are joined into one string."""
        if self.open:
            self.open = False
            self._gaps = pack(self._gaps)  # type: ignore[arg-type]  # open: an array
            segments = self._segments
            if segments and type(segments[-1]) is _Deltas:
                segments[-1].close()

    # -- reading --------------------------------------------------------------------------

    def time_of(self, k: int) -> float:
        """The recorded time of member ``k``."""
        return self._at(sum(itertools.islice(self._times(), k + 1)))

    def _times(self) -> Iterator[int]:
        """Each member's gap, in order."""
        return counts(self._gaps, self._count)

    def _event(self, k: int, when: float, chunk: Mapping[str, Any]) -> SessionEvent:
        data = {"turn": self.turn, "step": self.step, "chunk": chunk}
        return SessionEvent(self.seq0 + k, "assistant/chunk", when, data)

    def member(self, k: int) -> SessionEvent:
        """The ``assistant/chunk`` event of member ``k`` (``0 <= k < len(run)``)."""
        segments = self._segments  # a few per run: their ends are counted, not kept
        ends = list(itertools.accumulate(len(s) if type(s) is _Deltas else 1 for s in segments))
        j = bisect.bisect_right(ends, k)
        segment = segments[j]
        start = ends[j - 1] if j else 0
        when = self.time_of(k)
        if type(segment) is _Deltas:
            return self._event(k, when, segment.chunk(segment.piece(k - start)))
        return self._event(k, when, _json_of(segment))  # type: ignore[arg-type]  # a single

    def chunks(self) -> Iterator[Mapping[str, Any]]:
        """The JSON form of each member's chunk (``chunk_to_json``), in order."""
        for segment in self._segments:
            if type(segment) is _Deltas:
                for piece in segment.pieces():
                    yield segment.chunk(piece)
            else:
                yield _json_of(segment)  # type: ignore[arg-type]  # a single

    def __iter__(self) -> Iterator[SessionEvent]:
        total = 0
        for k, (gap, chunk) in enumerate(zip(self._times(), self.chunks(), strict=True)):
            total += gap
            yield self._event(k, self._at(total), chunk)

    def texts(self) -> list[str]:
        """The text of each run of consecutive deltas of one block, in order."""
        return [
            "".join(segment.pieces()) if segment.parts is not None else segment.text
            for segment in self._segments
            if type(segment) is _Deltas
        ]

    def share(self, texts: Iterable[str]) -> None:
        """Keep, for each run of deltas whose joined text equals one of ``texts`` (the
        assembled blocks' texts), that string instead of its own copy. The run must
        be closed."""
        by_length: dict[int, list[str]] = {}
        for text in texts:
            by_length.setdefault(len(text), []).append(text)
        for segment in self._segments:
            if type(segment) is _Deltas:  # closed: the run is
                for same in by_length.get(len(segment.text), ()):
                    if same == segment.text:
                        segment.text = same
                        break

    # -- the stored form ------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The stored row ``{seq, type: "assistant/chunks", time, data: {turn, step,
        chunks, dt}}``: ``seq`` and ``time`` are the first member's; ``chunks`` holds
        each member, a delta that continues the delta before it (same type, same
        block) as its bare text and any other as its chunk object; ``dt[k - 1]`` is
        the milliseconds from member ``k - 1`` to member ``k``."""
        items: list[Any] = []
        for segment in self._segments:
            if type(segment) is _Deltas:
                pieces = segment.pieces()
                before = items[-1] if items else None
                if _continued(before) != (segment.kind, segment.index):
                    items.append(segment.chunk(next(pieces)))
                items.extend(pieces)
            else:
                items.append(_json_of(segment))  # type: ignore[arg-type]  # a single
        data = {
            "turn": self.turn,
            "step": self.step,
            "chunks": items,
            "dt": list(self._times())[1:],
        }
        return {"seq": self.seq0, "type": CHUNKS_ROW, "time": self.time0, "data": data}

    @classmethod
    def from_json(cls, seq0: int, time0: float, data: Mapping[str, Any]) -> ChunkRun:
        """The (closed) run of a stored row's fields; raises :class:`SessionError`
        saying what is malformed."""
        turn, step, items, dt = (data.get(k) for k in ("turn", "step", "chunks", "dt"))
        if type(turn) is not int or type(step) is not int:
            raise SessionError("data.turn or data.step is not an integer")
        if not isinstance(items, list) or not items:
            raise SessionError("data.chunks is not a non-empty array")
        if not isinstance(dt, list) or len(dt) != len(items) - 1:
            raise SessionError("data.dt is not an array with one entry fewer than data.chunks")
        run = cls(seq0, time0, turn, step)
        for k, item in enumerate(items):
            gap = dt[k - 1] if k else 0
            if type(gap) is not int or gap < 0:
                raise SessionError(f"data.dt[{k - 1}] is not a non-negative integer")
            run._stamp(gap)
            run._load(k, item)
        run.close()
        return run

    def _load(self, k: int, item: object) -> None:
        if isinstance(item, str):
            kind, index = _continued(self._segments[-1] if self._segments else None)
            if kind is None:
                raise SessionError(f"data.chunks[{k}] is text, but no delta comes before it")
            self._delta(kind, index, item)
            return
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise SessionError(f"data.chunks[{k}] is neither text nor a chunk object")
        key = DELTA_KEYS.get(item["type"])
        head, text = item.get("index"), item.get(key or "")
        if key is not None and len(item) == 3 and type(head) is int and type(text) is str:
            self._delta(item["type"], head, text)
        else:
            self._single(item)


def _continued(last: object) -> tuple[str | None, int]:
    """The delta type and block that a bare-text member after ``last`` continues."""
    if type(last) is _Deltas:
        return last.kind, last.index
    if isinstance(last, Mapping):
        kind, index = last.get("type"), last.get("index")
        if kind in DELTA_KEYS and type(index) is int:
            return kind, index
    return None, 0


_Row = SessionEvent | ChunkRun


class EventLog(Sequence[SessionEvent]):
    """The events of one session in order (``events[i].seq == i``), chunks packed.

    Reads like a list of :class:`SessionEvent`: ``len``, indexing, slices (lists),
    iteration, ``reversed``, ``==`` with a list, and ``del`` of a tail. Only the
    session appends to it.
    """

    __slots__ = ("_len", "_rows", "_run_rows", "_run_seqs")

    def __init__(self, rows: list[_Row] | None = None) -> None:
        #: Plain events and runs, in order (a given list is taken over, not copied).
        self._rows: list[_Row] = [] if rows is None else rows
        #: The seq0 and the row index of every run, in order.
        self._run_seqs: list[int] = []
        self._run_rows: list[int] = []
        length = len(self._rows)  # one each, and a run its chunks
        for i, row in enumerate(self._rows):
            if type(row) is ChunkRun:
                self._run_seqs.append(row.seq0)
                self._run_rows.append(i)
                length += len(row) - 1
        self._len = length

    def rows(self) -> Sequence[_Row]:
        """The rows as stored: plain events and :class:`ChunkRun` s, in order."""
        return self._rows

    # -- writing (only the session) -------------------------------------------------------

    def _add_chunk(self, turn: int, step: int, chunk: Chunk, when: float) -> float:
        """Start a run of ``(turn, step)`` with ``chunk`` (closing the run the log ends
        with, if any: the session adds the chunks that continue an open run of their
        step to it directly); returns the time the chunk is recorded with."""
        rows = self._rows
        if rows and type(rows[-1]) is ChunkRun:
            rows[-1].close()
        run = ChunkRun(self._len, when, turn, step)
        self._run_seqs.append(self._len)
        self._run_rows.append(len(rows))
        rows.append(run)
        self._len += 1
        return run.add(chunk, when)

    # -- reading --------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._len

    def run_at(self, seq: int) -> ChunkRun | None:
        """The run that holds event ``seq``, or None when it is a plain event."""
        j = bisect.bisect_right(self._run_seqs, seq) - 1
        if j < 0:
            return None
        run: ChunkRun = self._rows[self._run_rows[j]]  # type: ignore[assignment]  # a run
        return run if seq < run.seq0 + len(run) else None

    def _at(self, seq: int) -> SessionEvent:
        seqs = self._run_seqs
        if not seqs or seq < seqs[0]:
            return self._rows[seq]  # type: ignore[return-value]  # no run before it
        j = bisect.bisect_right(seqs, seq) - 1
        row = self._run_rows[j]
        run: ChunkRun = self._rows[row]  # type: ignore[assignment]  # a run
        offset = seq - run.seq0
        if offset < len(run):
            return run.member(offset)
        return self._rows[row + 1 + offset - len(run)]  # type: ignore[return-value]

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | list[SessionEvent]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("session event index out of range")
        return self._at(index)

    def __iter__(self) -> Iterator[SessionEvent]:
        for row in self._rows:
            if type(row) is ChunkRun:
                yield from row
            else:
                yield row  # type: ignore[misc]  # a plain event

    def __reversed__(self) -> Iterator[SessionEvent]:
        for row in reversed(self._rows):
            if type(row) is ChunkRun:
                yield from reversed(list(row))
            else:
                yield row  # type: ignore[misc]  # a plain event

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EventLog | list | tuple):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"EventLog({list(self)!r})"

    def __delitem__(self, index: int | slice) -> None:
        """Drop a tail of the log: ``del events[n:]`` or ``del events[-1]``."""
        if isinstance(index, slice):
            start, stop, stride = index.indices(self._len)
            tail = stride == 1 and (stop >= self._len or start >= stop)
        else:
            start = index + self._len if index < 0 else index
            tail = start == self._len - 1
        if not tail:
            raise SessionError("only a tail of a session log can be deleted")
        while self._len > start:
            self._drop_last(start)

    def _drop_last(self, length: int) -> None:
        rows = self._rows
        last = rows[-1]
        if type(last) is not ChunkRun:
            rows.pop()
            self._len -= 1
            return
        before = self._len - len(last)
        if before >= length:
            rows.pop()
            self._run_seqs.pop()
            self._run_rows.pop()
            self._len = before
            return
        # Keep the run's first members: rebuild it from what they read back as.
        run = ChunkRun(last.seq0, last.time0, last.turn, last.step)
        kept = zip(last._times(), last.chunks(), strict=True)
        for k, (gap, chunk) in enumerate(itertools.islice(kept, length - before)):
            run._stamp(gap)
            run._load(k, chunk)
        run.close()
        rows[-1] = run
        self._len = length
