"""``read``: the exact envelope, footers, truncation, caps and errors."""

from __future__ import annotations

import os

import pytest

from dsh_tool_fs import _render
from tests.plugins.fs.fs_support import Layout, envelope, fs_stack, run

pytestmark = pytest.mark.anyio


async def test_a_whole_file_is_numbered_lines_and_the_end_of_file_footer(ws: Layout) -> None:
    (ws.root / "a.txt").write_text("alpha\nbeta\n")
    async with fs_stack() as root:
        result = await run(root, "read", ws.call(), file_path="a.txt")
    assert (result.is_error, result.code) == (False, None)
    assert result.content == (
        f"<path>{ws.root}/a.txt</path>\n<type>file</type>\n<content>\n"
        "1: alpha\n2: beta\n\n(End of file - total 2 lines)\n</content>"
    )


async def test_an_empty_file_and_a_file_without_a_final_line_break(ws: Layout) -> None:
    (ws.root / "empty").write_text("")
    (ws.root / "open").write_text("one\ntwo")
    (ws.root / "blank").write_text("\n")
    async with fs_stack() as root:
        empty = await run(root, "read", ws.call(), file_path="empty")
        unterminated = await run(root, "read", ws.call(), file_path="open")
        blank = await run(root, "read", ws.call(), file_path="blank", offset=1)
    assert empty.content == envelope(ws.root / "empty", "\n(End of file - total 0 lines)")
    assert unterminated.content == envelope(
        ws.root / "open", "1: one\n2: two\n\n(End of file - total 2 lines)"
    )
    assert blank.content == envelope(ws.root / "blank", "1: \n\n(End of file - total 1 lines)")


async def test_a_page_says_how_to_continue(ws: Layout) -> None:
    (ws.root / "n.txt").write_text("".join(f"l{i}\n" for i in range(1, 11)))
    async with fs_stack() as root:
        middle = await run(root, "read", ws.call(), file_path="n.txt", offset=4, limit=3)
        tail = await run(root, "read", ws.call(), file_path="n.txt", offset=9, limit=5)
    assert middle.content == envelope(
        ws.root / "n.txt",
        "4: l4\n5: l5\n6: l6\n\n(Showing lines 4-6 of 10. Use offset=7 to continue.)",
    )
    assert tail.content == envelope(
        ws.root / "n.txt", "9: l9\n10: l10\n\n(End of file - total 10 lines)"
    )


async def test_the_read_limit_is_the_default_and_the_maximum(ws: Layout) -> None:
    (ws.root / "n.txt").write_text("x\n" * 5)
    async with fs_stack(tools={"read_limit": 2}) as root:
        default = await run(root, "read", ws.call(), file_path="n.txt")
        asked_more = await run(root, "read", ws.call(), file_path="n.txt", offset=2, limit=4)
    assert default.content.endswith(
        "1: x\n2: x\n\n(Showing lines 1-2 of 5. Use offset=3 to continue.)\n</content>"
    )
    assert asked_more.content.endswith(
        "2: x\n3: x\n\n(Showing lines 2-3 of 5. Use offset=4 to continue.)\n</content>"
    )


async def test_long_lines_are_cut_with_a_marker(ws: Layout) -> None:
    (ws.root / "wide.txt").write_text("abcdefghij\nshort\n")
    async with fs_stack(tools={"read_max_line_length": 4}) as root:
        result = await run(root, "read", ws.call(), file_path="wide.txt")
    assert result.content == envelope(
        ws.root / "wide.txt",
        "1: abcd... (line truncated to 4 chars)\n2: shor... (line truncated to 4 chars)\n\n"
        "(End of file - total 2 lines)",
    )


async def test_the_byte_cap_keeps_whole_lines_and_says_so(ws: Layout) -> None:
    # Each numbered line "N: xxxx\n" is 8 bytes; 20 bytes hold two of them.
    (ws.root / "cap.txt").write_text("xxxx\n" * 5)
    (ws.root / "wide.txt").write_text("é" * 30 + "\nb\n")
    async with fs_stack(tools={"read_max_bytes": 20}) as root:
        capped = await run(root, "read", ws.call(), file_path="cap.txt", offset=2)
        # A line over the cap on its own is still shown: a read always makes progress.
        one = await run(root, "read", ws.call(), file_path="wide.txt")
    assert capped.content == envelope(
        ws.root / "cap.txt",
        "2: xxxx\n3: xxxx\n\n(Output capped. Showing lines 2-3. Use offset=4 to continue.)",
    )
    assert one.content == envelope(
        ws.root / "wide.txt",
        f"1: {'é' * 30}\n\n(Output capped. Showing lines 1-1. Use offset=2 to continue.)",
    )


async def test_the_byte_cap_counts_utf8_bytes(ws: Layout) -> None:
    (ws.root / "u.txt").write_text("éé\néé\n")  # "1: éé\n" is 8 bytes, 6 characters
    async with fs_stack(tools={"read_max_bytes": 14}) as root:
        result = await run(root, "read", ws.call(), file_path="u.txt")
    assert result.content == envelope(
        ws.root / "u.txt", "1: éé\n\n(Output capped. Showing lines 1-1. Use offset=2 to continue.)"
    )


async def test_carriage_returns_before_line_feeds_are_dropped(ws: Layout) -> None:
    (ws.root / "dos.txt").write_bytes(b"one\r\ntwo\rthree\r\n")
    async with fs_stack() as root:
        result = await run(root, "read", ws.call(), file_path="dos.txt")
    assert result.content == envelope(
        ws.root / "dos.txt", "1: one\n2: two\rthree\n\n(End of file - total 2 lines)"
    )


async def test_line_numbers_past_the_kept_ones(ws: Layout) -> None:
    last = _render.PREFIXES_KEPT + 1
    (ws.root / "long.txt").write_text("x\n" * last)
    async with fs_stack() as root:
        result = await run(root, "read", ws.call(), file_path="long.txt", offset=last - 1)
    assert result.content == envelope(
        ws.root / "long.txt", f"{last - 1}: x\n{last}: x\n\n(End of file - total {last} lines)"
    )


async def test_offset_past_the_end_and_missing_files_are_not_found(ws: Layout) -> None:
    (ws.root / "two.txt").write_text("a\nb\n")
    (ws.root / "empty").write_text("")
    async with fs_stack() as root:
        past = await run(root, "read", ws.call(), file_path="two.txt", offset=3)
        empty = await run(root, "read", ws.call(), file_path="empty", offset=2)
        missing = await run(root, "read", ws.call(), file_path="nope.txt")
        under_a_file = await run(root, "read", ws.call(), file_path="two.txt/x")
    assert (past.content, past.is_error, past.code) == (
        f'Error: offset 3 is out of range for "{ws.root}/two.txt" (2 lines)',
        True,
        "FS_NOT_FOUND",
    )
    assert empty.content == f'Error: offset 2 is out of range for "{ws.root}/empty" (0 lines)'
    assert (missing.content, missing.code) == (
        f'Error: cannot read "{ws.root}/nope.txt": not found',
        "FS_NOT_FOUND",
    )
    assert under_a_file.code == "FS_NOT_FOUND"


async def test_directories_fifos_and_binary_files_are_refused(ws: Layout) -> None:
    (ws.root / "dir").mkdir()
    os.mkfifo(ws.root / "pipe")
    (ws.root / "nul.bin").write_bytes(b"text\0more")
    (ws.root / "latin1.txt").write_bytes(b"caf\xe9\n")
    async with fs_stack() as root:
        directory = await run(root, "read", ws.call(), file_path="dir")
        fifo = await run(root, "read", ws.call(), file_path="pipe")
        nul = await run(root, "read", ws.call(), file_path="nul.bin")
        latin1 = await run(root, "read", ws.call(), file_path="latin1.txt")
    assert (directory.content, directory.code) == (
        f'Error: "{ws.root}/dir" is not a regular file: it is a directory',
        "FS_NOT_REGULAR_FILE",
    )
    assert (fifo.content, fifo.code) == (
        f'Error: "{ws.root}/pipe" is not a regular file: it is a FIFO',
        "FS_NOT_REGULAR_FILE",
    )
    assert (nul.content, nul.code) == (
        f'Error: cannot read "{ws.root}/nul.bin" as text: it is binary (a NUL byte)',
        "FS_NOT_TEXT",
    )
    assert (latin1.content, latin1.code) == (
        f'Error: cannot read "{ws.root}/latin1.txt" as text: it is not valid UTF-8 (byte 3)',
        "FS_NOT_TEXT",
    )


async def test_bad_arguments_are_invalid_args(ws: Layout) -> None:
    async with fs_stack() as root:
        zero = await run(root, "read", ws.call(), file_path="a", offset=0)
        negative = await run(root, "read", ws.call(), file_path="a", limit=0)
    assert zero.code == negative.code == "INVALID_ARGS"
    assert zero.content.startswith("invalid arguments: offset:")
    assert negative.content.startswith("invalid arguments: limit:")
