"""A block type that is a known ``str`` exactly takes a shortcut in the assembler; any
other value equal to a known type (a ``str`` subclass, say) is taken as that type."""

from __future__ import annotations

import pytest

from dsh_llm import AssemblyError, BlockAssembler, BlockEnd, BlockStart, TextBlock, TextDelta


class Kind(str):
    """A str subclass (what a wrapper library may hand over)."""


def test_a_str_subclass_block_type_is_the_known_type() -> None:
    assembler = BlockAssembler()
    for chunk in (BlockStart(0, Kind("text")), TextDelta(0, "hi"), BlockEnd(0)):  # type: ignore[arg-type]  # the point of the test
        assembler.push(chunk)
    block = assembler.result().message.content[0]
    assert block == TextBlock("hi")


def test_a_str_subclass_block_type_contradicting_the_block_is_refused() -> None:
    assembler = BlockAssembler()
    assembler.push(TextDelta(0, "hi"))
    with pytest.raises(AssemblyError, match="block 0 is a text block, but a block-start"):
        assembler.push(BlockStart(0, Kind("reasoning")))  # type: ignore[arg-type]  # the point of the test
