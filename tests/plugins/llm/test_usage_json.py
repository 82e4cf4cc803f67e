"""A usage's JSON form: its counts that are set, in field order, as every record's."""

from __future__ import annotations

import itertools

import pytest

from dsh_llm import Usage

_OPTIONAL = ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


@pytest.mark.parametrize(
    "present", [c for n in range(4) for c in itertools.combinations(_OPTIONAL, n)]
)
def test_a_usage_encodes_its_set_counts_in_field_order(present: tuple[str, ...]) -> None:
    usage = Usage(3, 4, **{name: i + 1 for i, name in enumerate(present)})
    data = usage.to_json()
    assert list(data) == ["input_tokens", "output_tokens", *present]
    assert data == {"input_tokens": 3, "output_tokens": 4} | {
        name: i + 1 for i, name in enumerate(present)
    }
    assert Usage.from_json(data) == usage
