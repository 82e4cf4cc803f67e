"""Sequences of small counts (a packed run's delta lengths and time gaps) in few bytes.

Most deltas of a stream are a few characters long, and most chunks of a fast stream
arrive within a few milliseconds of the one before: counts below 16 are kept two to a
byte, any other sequence in the narrowest array that holds it. Packing and reading
run in C (``map`` and ``itertools`` over builtins): no Python call per count.
"""

from __future__ import annotations

import itertools
import operator
from array import array
from collections.abc import Iterator
from typing import TypeAlias

__all__ = ["LIMITS", "Counts", "counts", "narrowest", "pack"]

#: An array type code and the first count it cannot hold.
LIMITS = {"B": 0x100, "H": 0x10000, "I": 0x1_0000_0000}

#: Packed counts: ``bytes`` of two counts below 16 each (high nibble first), or an array.
Counts: TypeAlias = "bytes | array[int]"

#: The two counts each byte holds.
_PAIRS = tuple((byte >> 4, byte & 15) for byte in range(256))


def narrowest(top: int) -> str:
    """The narrowest unsigned array type code holding ``0..top``."""
    for code, limit in LIMITS.items():
        if top < limit:
            return code
    return "Q"


#: The counts that fit in a nibble, as bytes (``translate`` deletes them).
_NIBBLES = bytes(range(16))


def pack(values: list[int] | array[int]) -> Counts:
    """``values`` (non-negative), two to a byte when they are all below 16."""
    if not any(values):  # all 0 (the gaps of a fast stream): zero bytes, as below
        return bytes((len(values) + 1) // 2)
    small = _as_bytes(values)
    if small is None or small.translate(None, _NIBBLES):  # a count of 16 or more
        return array(narrowest(max(values, default=0)), values)
    highs = map(operator.lshift, small[0::2], itertools.repeat(4))
    # A pad after an odd count (the reader takes as many counts as were packed).
    lows = itertools.chain(small[1::2], (0,))
    return bytes(map(operator.or_, highs, lows))


def _as_bytes(values: list[int] | array[int]) -> bytes | None:
    """``values`` one to a byte, or None when one of them needs more."""
    if type(values) is array:
        return values.tobytes() if values.typecode == "B" else None
    try:
        return bytes(values)
    except ValueError:  # a count above 255
        return None


def counts(packed: Counts, count: int) -> Iterator[int]:
    """The first ``count`` counts of ``packed`` (all of an array's)."""
    if type(packed) is bytes:
        pairs = itertools.chain.from_iterable(map(_PAIRS.__getitem__, packed))
        return itertools.islice(pairs, count)
    return iter(packed)
