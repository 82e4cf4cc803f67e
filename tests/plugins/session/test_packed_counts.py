"""A packed run keeps its delta lengths and its time gaps two to a byte when they are
below 16 (``_counts``), and reads back the same events either way."""

from __future__ import annotations

from array import array

import pytest

from dsh_llm import BlockEnd, BlockStart, Chunk, TextDelta, chunk_to_json
from dsh_session import ChunkRun
from dsh_session._counts import counts, narrowest, pack


@pytest.mark.parametrize("values", [[], [0], [3, 4], [15, 0, 7], list(range(16)) * 3, [1] * 1001])
def test_counts_below_16_are_kept_two_to_a_byte(values: list[int]) -> None:
    packed = pack(values)
    assert type(packed) is bytes
    assert len(packed) == (len(values) + 1) // 2  # after an odd count, a pad
    assert list(counts(packed, len(values))) == values


@pytest.mark.parametrize(
    ("values", "code"),
    [([16], "B"), ([0, 255, 3], "B"), ([256, 1], "H"), ([1 << 16], "I"), ([1 << 40], "Q")],
)
def test_other_counts_are_kept_in_the_narrowest_array(values: list[int], code: str) -> None:
    packed = pack(values)
    assert type(packed) is array
    assert packed.typecode == code == narrowest(max(values))
    assert list(counts(packed, len(values))) == values


def _stream(lengths: list[int]) -> list[Chunk]:
    deltas: list[Chunk] = [TextDelta(0, "x" * n) for n in lengths]
    return [BlockStart(0, "text"), *deltas, BlockEnd(0)]


def _run(chunks: list[Chunk], gaps_ms: list[int]) -> ChunkRun:
    run = ChunkRun(5, 100.0, 1, 2)
    when = 100.0
    for chunk, gap in zip(chunks, gaps_ms, strict=True):
        when += gap / 1000
        run.add(chunk, when)
    return run


@pytest.mark.parametrize(
    ("lengths", "gaps"),
    [
        ([3, 4, 5] * 333, [0] * 1001),  # a fast stream of short deltas
        ([3, 40, 5], [0, 2, 300, 7, 1]),  # a long delta, a slow chunk
        ([1, 2], [0, 15, 16, 0]),
        ([0, 15], [0, 1, 2, 3]),  # an empty delta
    ],
)
def test_a_closed_run_reads_back_what_it_read_while_open(
    lengths: list[int], gaps: list[int]
) -> None:
    chunks = _stream(lengths)
    run = _run(chunks, [0, *gaps[1:]])
    open_events = list(run)
    open_times = [run.time_of(k) for k in range(len(run))]
    run.close()
    assert list(run) == open_events
    assert [run.member(k) for k in range(len(run))] == open_events
    assert [run.time_of(k) for k in range(len(run))] == open_times
    assert [event.data["chunk"] for event in run] == [chunk_to_json(c) for c in chunks]
    stored = run.to_json()
    assert stored["data"]["dt"] == gaps[1:]
    loaded = ChunkRun.from_json(stored["seq"], stored["time"], stored["data"])
    assert list(loaded) == open_events
    assert loaded.to_json() == stored


def test_a_fast_stream_of_short_deltas_keeps_a_byte_per_delta() -> None:
    count = 1000
    run = _run(_stream([4] * count), [0] * (count + 2))
    run.close()
    segment = run._segments[1]
    assert len(run._gaps) == (count + 2) // 2  # the block start and end too
    assert len(segment.lengths) == count // 2  # type: ignore[union-attr]  # a delta run
    assert segment.lengths.count(0x44) == count // 2 - 1  # type: ignore[union-attr]  # as above
    assert segment.lengths[-1] == 0x40  # type: ignore[union-attr]  # the last is not kept
    assert segment.text == "xxxx" * count  # type: ignore[union-attr]  # as above
