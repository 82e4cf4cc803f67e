"""Counts that are all zero (a fast stream's time gaps) pack as any small counts do."""

from __future__ import annotations

import pytest

from dsh_session._counts import counts, pack


@pytest.mark.parametrize("size", [0, 1, 2, 5])
def test_zero_counts_pack_two_to_a_byte(size: int) -> None:
    packed = pack([0] * size)
    assert packed == bytes((size + 1) // 2)
    assert list(counts(packed, size)) == [0] * size
    # The same bytes as counts below 16 that are not all zero take.
    assert len(pack([1] * size)) == len(packed)
