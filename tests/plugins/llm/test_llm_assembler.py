"""The ``BlockAssembler`` edge protocol (``dsh-core.md`` §5).

Adapters stream with quirks: missing or repeated starts, stragglers, split tool-call
fragments, missing usage or finish. The assembler tolerates each one the documented way
and refuses a stream that contradicts itself with an ``AssemblyError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from dsh import DshError
from dsh_llm import (
    AssemblyError,
    BlockAssembler,
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    LlmFailure,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    UsageChunk,
)
from tests.plugins.llm.llm_support import assemble


def content(chunks: Iterable[Chunk]) -> tuple[Any, ...]:
    return assemble(chunks).message.content


def test_a_well_formed_stream() -> None:
    result = assemble(
        [
            BlockStart(0, "reasoning"),
            ReasoningDelta(0, "let me "),
            ReasoningDelta(0, "see"),
            BlockEnd(0),
            BlockStart(1, "text"),
            TextDelta(1, "Hello"),
            TextDelta(1, ", world"),
            BlockEnd(1),
            BlockStart(2, "tool-call"),
            ToolCallDelta(2, "call_a", '{"x":', name="probe"),
            ToolCallDelta(2, None, " 1}"),
            BlockEnd(2),
            UsageChunk(Usage(12, 7)),
            Finish("tool-calls"),
        ]
    )
    assert result.message == Message(
        "assistant",
        (
            ReasoningBlock("let me see"),
            TextBlock("Hello, world"),
            ToolCallBlock("call_a", "probe", '{"x": 1}'),
        ),
    )
    assert result.usage == Usage(12, 7)
    assert result.finish == Finish("tool-calls")


def test_an_empty_stream_is_an_empty_stop() -> None:
    result = assemble([])
    assert result.message == Message("assistant", ())
    assert result.usage is None
    assert result.finish == Finish("stop")


# --- starts ------------------------------------------------------------------------------


def test_duplicate_block_start_is_ignored_and_text_keeps_accumulating() -> None:
    assert content(
        [
            BlockStart(0, "text"),
            TextDelta(0, "ab"),
            BlockStart(0, "text"),
            TextDelta(0, "cd"),
        ]
    ) == (TextBlock("abcd"),)


def test_deltas_without_block_start_create_the_block() -> None:
    assert content(
        [
            ReasoningDelta(0, "hm"),
            TextDelta(1, "a"),
            ToolCallDelta(2, "c", "{}", name="t"),
            TextDelta(1, "b"),
        ]
    ) == (ReasoningBlock("hm"), TextBlock("ab"), ToolCallBlock("c", "t", "{}"))


def test_blocks_keep_the_order_their_index_was_first_seen() -> None:
    assert content([TextDelta(5, "five"), TextDelta(1, "one"), TextDelta(5, "!")]) == (
        TextBlock("five!"),
        TextBlock("one"),
    )


def test_a_started_block_without_deltas_is_empty() -> None:
    assert content([BlockStart(0, "text"), BlockStart(1, "reasoning")]) == (
        TextBlock(""),
        ReasoningBlock(""),
    )


# --- ends and stragglers -----------------------------------------------------------------


def test_stragglers_after_block_end_are_ignored() -> None:
    assert content(
        [
            TextDelta(0, "kept"),
            BlockEnd(0),
            TextDelta(0, " straggler"),
            ReasoningDelta(1, "r"),
            BlockEnd(1),
            ReasoningDelta(1, " late"),
            ToolCallDelta(2, "c", "{}", name="t"),
            BlockEnd(2),
            ToolCallDelta(2, "other", "garbage", name="other"),
        ]
    ) == (TextBlock("kept"), ReasoningBlock("r"), ToolCallBlock("c", "t", "{}"))


def test_a_repeated_block_end_is_ignored() -> None:
    assert content(
        [
            TextDelta(0, "first"),
            BlockEnd(0, TextBlock("final")),
            BlockEnd(0, TextBlock("second final")),
            BlockEnd(0),
        ]
    ) == (TextBlock("final"),)


def test_a_block_end_carrying_a_block_wins_over_the_deltas() -> None:
    assert content(
        [
            BlockStart(0, "tool-call"),
            ToolCallDelta(0, "tmp", '{"a"', name="draft"),
            BlockEnd(0, ToolCallBlock("call_9", "final", '{"a": 2}')),
        ]
    ) == (ToolCallBlock("call_9", "final", '{"a": 2}'),)


def test_a_block_end_carrying_a_block_may_stand_alone() -> None:
    assert content(
        [BlockEnd(3, TextBlock("whole")), BlockEnd(1, ToolCallBlock("c", "n", "{}"))]
    ) == (TextBlock("whole"), ToolCallBlock("c", "n", "{}"))


def test_a_block_end_without_a_block_closes_with_what_accumulated() -> None:
    assert content([BlockStart(0, "reasoning"), ReasoningDelta(0, "x"), BlockEnd(0)]) == (
        ReasoningBlock("x"),
    )


def test_open_blocks_are_completed_as_they_stand() -> None:
    assert content([TextDelta(0, "partial"), ToolCallDelta(1, "c", '{"tr', name="t")]) == (
        TextBlock("partial"),
        ToolCallBlock("c", "t", '{"tr'),
    )


# --- tool-call fragments -----------------------------------------------------------------


def test_tool_call_fragments_merge_and_the_first_id_is_kept() -> None:
    assert content(
        [
            ToolCallDelta(0, "call_1", "", name="read"),
            ToolCallDelta(0, None, '{"path"'),
            ToolCallDelta(0, "", ': "a.txt"'),
            ToolCallDelta(0, None, "}", name=""),
        ]
    ) == (ToolCallBlock("call_1", "read", '{"path": "a.txt"}'),)


def test_a_tool_call_without_an_id_gets_call_index() -> None:
    assert content(
        [
            ToolCallDelta(0, None, "{}", name="a"),
            ToolCallDelta(4, "", "{}", name="b"),
            BlockEnd(4),
        ]
    ) == (ToolCallBlock("call-0", "a", "{}"), ToolCallBlock("call-4", "b", "{}"))


def test_the_name_is_taken_only_when_truthy() -> None:
    assert content(
        [
            ToolCallDelta(0, "c", "", name=None),
            ToolCallDelta(0, None, "", name="late"),
            ToolCallDelta(0, None, "{}", name=""),
        ]
    ) == (ToolCallBlock("c", "late", "{}"),)
    assert content([ToolCallDelta(0, "c", "{}")]) == (ToolCallBlock("c", "", "{}"),)


def test_parallel_tool_calls_assemble_independently() -> None:
    assert content(
        [
            ToolCallDelta(0, "a", "{", name="one"),
            ToolCallDelta(1, "b", "[", name="two"),
            ToolCallDelta(0, None, "}"),
            ToolCallDelta(1, None, "]"),
        ]
    ) == (ToolCallBlock("a", "one", "{}"), ToolCallBlock("b", "two", "[]"))


# --- usage and finish --------------------------------------------------------------------


def test_missing_usage_is_none_and_the_last_usage_wins() -> None:
    assert assemble([TextDelta(0, "x"), Finish("stop")]).usage is None
    assert assemble(
        [UsageChunk(Usage(1, 1)), TextDelta(0, "x"), UsageChunk(Usage(9, 8, reasoning_tokens=2))]
    ).usage == Usage(9, 8, reasoning_tokens=2)


def test_missing_finish_is_stop_and_the_finish_is_kept() -> None:
    assert assemble([TextDelta(0, "x")]).finish == Finish("stop")
    failure = LlmFailure("boom", "ADAPTER_ERROR")
    result = assemble([TextDelta(0, "x"), Finish("error", failure)])
    assert result.finish == Finish("error", failure)
    assert result.message.content == (TextBlock("x"),)


def test_max_tokens_drops_tool_calls() -> None:
    result = assemble(
        [
            ReasoningDelta(0, "r"),
            TextDelta(1, "t"),
            ToolCallDelta(2, "c", '{"trunc', name="t"),
            BlockEnd(3, ToolCallBlock("d", "u", "{}")),
            Finish("max-tokens"),
        ]
    )
    assert result.message.content == (ReasoningBlock("r"), TextBlock("t"))
    assert result.finish == Finish("max-tokens")


def test_result_can_be_read_mid_stream() -> None:
    assembler = BlockAssembler()
    assembler.push(TextDelta(0, "a"))
    assert assembler.result().message.content == (TextBlock("a"),)
    assembler.push(TextDelta(0, "b"))
    assert assembler.result().message.content == (TextBlock("ab"),)


# --- interrupted streams -----------------------------------------------------------------


def test_interrupted_blocks_keep_visible_text_and_reasoning() -> None:
    assembler = BlockAssembler()
    chunks: list[Chunk] = [
        ReasoningDelta(0, "thought"),
        TextDelta(1, "  \n "),
        TextDelta(2, "said"),
        ToolCallDelta(3, "c", "{", name="t"),
        ReasoningDelta(4, ""),
        BlockEnd(5, TextBlock("closed")),
    ]
    for chunk in chunks:
        assembler.push(chunk)
    assert assembler.interrupted_blocks() == [
        ReasoningBlock("thought"),
        TextBlock("said"),
        TextBlock("closed"),
    ]


def test_interrupted_blocks_of_an_empty_stream() -> None:
    assert BlockAssembler().interrupted_blocks() == []


# --- contradictions ----------------------------------------------------------------------


def test_assembly_error_is_a_value_error_with_a_code() -> None:
    error = AssemblyError("x")
    assert isinstance(error, DshError)
    assert isinstance(error, ValueError)
    assert error.code == "ASSEMBLY_INVARIANT"


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        (
            [ToolCallDelta(0, "c", "{}"), TextDelta(0, "x")],
            "block 0 is a tool-call block, but a text-delta chunk targets it as a text block",
        ),
        (
            [BlockStart(1, "text"), ReasoningDelta(1, "x")],
            "block 1 is a text block, but a reasoning-delta chunk targets it as a reasoning block",
        ),
        (
            [TextDelta(0, "x"), ToolCallDelta(0, "c", "{}")],
            "block 0 is a text block, but a tool-call-delta chunk targets it as a tool-call block",
        ),
        (
            [TextDelta(0, "x"), BlockEnd(0), TextDelta(0, "y"), ReasoningDelta(0, "z")],
            "block 0 is a text block, but a reasoning-delta chunk targets it as a reasoning block",
        ),
        (
            [BlockStart(0, "text"), BlockStart(0, "tool-call")],
            "block 0 is a text block, but a block-start chunk targets it as a tool-call block",
        ),
        (
            [TextDelta(2, "x"), BlockEnd(2, ReasoningBlock("x"))],
            "block 2 is a text block, but a block-end chunk targets it as a reasoning block",
        ),
        (
            [BlockEnd(7)],
            "block-end for block 7, which never started and carries no block",
        ),
        (
            [BlockEnd(0, ToolResultBlock("c", "x"))],
            "a block-end chunk gives block 0 the type 'tool-result', which a model stream "
            "cannot produce (expected one of text, reasoning, tool-call)",
        ),
        (
            [BlockStart(0, "image")],  # type: ignore[arg-type]  # the point of the test
            "a block-start chunk gives block 0 the type 'image', which a model stream "
            "cannot produce",
        ),
        (
            [TextBlock("not a chunk")],
            "unknown chunk TextBlock(text='not a chunk', type='text'): not one of the "
            "dsh_llm chunk types",
        ),
    ],
)
def test_contradictions_raise_assembly_error(chunks: list[Any], message: str) -> None:
    assembler = BlockAssembler()
    *before, last = chunks
    for chunk in before:
        assembler.push(chunk)
    with pytest.raises(AssemblyError) as caught:
        assembler.push(last)
    assert str(caught.value).startswith(message)
