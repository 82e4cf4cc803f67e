"""Stream captures: the tail in memory, the whole stream spilled, UTF-8 kept whole."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from dsh_bash import OutputSlice, SpillFolder, StreamCapture, StreamOutput
from dsh_bash._capture import _incomplete


def capture(
    tmp_path: Path, cap: int = 10, spill_max: int = 1000, folder: bool = True
) -> StreamCapture:
    return StreamCapture(
        "stdout",
        max_bytes=cap,
        spill_max_bytes=spill_max,
        folder=SpillFolder(str(tmp_path)) if folder else None,
    )


@pytest.mark.parametrize("size", [9, 10])
def test_output_up_to_the_cap_is_kept_whole(tmp_path: Path, size: int) -> None:
    stream = capture(tmp_path)
    stream.write(b"x" * (size - 1))
    stream.write(b"y")
    stream.close()
    assert stream.output() == StreamOutput("x" * (size - 1) + "y")
    assert (stream.size, stream.truncated, stream.spill_path) == (size, False, None)
    assert list(tmp_path.iterdir()) == []


def test_one_byte_over_the_cap_keeps_the_tail_and_spills_everything(tmp_path: Path) -> None:
    stream = capture(tmp_path)
    stream.write(b"0123456789")
    stream.write(b"A")
    for _ in range(30):  # enough to trim memory several times
        stream.write(b"abc")
    stream.close()
    whole = b"0123456789A" + b"abc" * 30
    out = stream.output()
    assert out.text == whole[-10:].decode()
    assert out.truncated
    assert out.spill_path is not None
    spill = Path(out.spill_path)
    assert spill.read_bytes() == whole
    assert stat.S_IMODE(spill.stat().st_mode) == 0o600
    assert stat.S_IMODE(spill.parent.stat().st_mode) == 0o700
    assert spill.parent.parent == tmp_path
    assert spill.name.startswith("stdout-")


def test_spill_names_are_unpredictable(tmp_path: Path) -> None:
    folder = SpillFolder(str(tmp_path))
    names = {Path(folder.new_file("stdout")[1]).name for _ in range(5)}
    assert len(names) == 5
    folder.remove()
    assert list(tmp_path.iterdir()) == []
    folder.remove()  # twice is fine


def test_a_multibyte_character_cut_by_the_cap_is_dropped_not_mangled(tmp_path: Path) -> None:
    stream = capture(tmp_path, cap=5)
    # "é" is 2 bytes, "€" 3: the last 5 bytes are b"\x82\xac" + "é" + "a".
    stream.write("€€é".encode() + b"a")
    assert stream.output().text == "éa"
    stream = capture(tmp_path, cap=4)
    stream.write("🎉🎉".encode())  # the last 4 bytes are one whole character
    assert stream.output().text == "🎉"


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    stream = capture(tmp_path, cap=100)
    stream.write(b"ok \xff\xfe end \xe2\x82")  # a stray byte pair and an unfinished "€"
    assert stream.output().text == "ok \ufffd\ufffd end \ufffd"


def test_the_spill_file_holds_at_most_spill_max_bytes(tmp_path: Path) -> None:
    stream = capture(tmp_path, cap=4, spill_max=12)
    stream.write(b"abcdef")  # the first overflow spills these 6
    stream.write(b"ghijkl")  # 6 more: full
    stream.write(b"mnop")  # memory only
    stream.close()
    out = stream.output()
    assert out.text == "mnop"
    assert out.spill_path is not None
    assert Path(out.spill_path).read_bytes() == b"abcdefghijkl"
    big = capture(tmp_path, cap=4, spill_max=5)
    big.write(b"0123456789")
    assert Path(big.output().spill_path or "").read_bytes() == b"01234"


def test_spill_off_and_no_folder_keep_only_the_tail(tmp_path: Path) -> None:
    for stream in (capture(tmp_path, spill_max=0), capture(tmp_path, folder=False)):
        stream.write(b"x" * 20 + b"tail")
        assert stream.output() == StreamOutput("xxxxxxtail", truncated=True, spill_path=None)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_cannot_be_made_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    stream = StreamCapture(
        "stderr", max_bytes=2, spill_max_bytes=100, folder=SpillFolder(str(blocker))
    )
    with caplog.at_level(logging.WARNING, logger="dsh.bash"):
        stream.write(b"abc")
        stream.write(b"def")
    assert stream.output() == StreamOutput("ef", truncated=True, spill_path=None)
    assert "cannot keep the full stderr of a command" in caplog.text


def test_a_write_error_stops_the_spill_and_keeps_what_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stream = capture(tmp_path, cap=2)
    stream.write(b"abc")

    def full(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with caplog.at_level(logging.WARNING, logger="dsh.bash"):
        stream.write(b"def")
        stream.write(b"ghi")
    monkeypatch.undo()
    out = stream.output()
    assert out.text == "hi"
    assert Path(out.spill_path or "").read_bytes() == b"abc"
    assert "No space left on device" in caplog.text


def test_read_since_is_incremental_and_waits_for_whole_characters(tmp_path: Path) -> None:
    stream = capture(tmp_path, cap=100)
    stream.write(b"one ")
    first = stream.read_since(0, final=False)
    assert (first.text, first.end, first.skipped) == ("one ", 4, 0)
    euro = "€".encode()
    stream.write(b"two " + euro[:2])
    second = stream.read_since(first.end, final=False)
    assert (second.text, second.end) == ("two ", 8)
    stream.write(euro[2:] + b"!")
    third = stream.read_since(second.end, final=False)
    assert (third.text, third.end) == ("€!", 12)
    assert stream.read_since(third.end, final=False).text == ""
    stream.write(euro[:1])
    assert stream.read_since(12, final=False).text == ""
    assert stream.read_since(12, final=True).text == "\ufffd"  # the stream ended there


def test_read_since_says_what_memory_lost(tmp_path: Path) -> None:
    stream = capture(tmp_path, cap=4)
    stream.write(b"aaaa" + "é".encode() * 5)  # 14 bytes; memory keeps the last 4
    assert stream.read_since(0, final=True) == OutputSlice("éé", 14, 10)
    stream = capture(tmp_path, cap=3)
    stream.write(b"aaaa" + "é".encode() * 5)  # memory starts inside a character
    assert stream.read_since(2, final=False) == OutputSlice("é", 14, 10)


@pytest.mark.parametrize(
    ("data", "incomplete"),
    [
        (b"", 0),
        (b"abc", 0),
        ("é".encode()[:1], 1),
        ("€".encode()[:2], 2),
        ("🎉".encode()[:3], 3),
        ("🎉".encode(), 0),
        (b"\x80\x80\x80\x80", 0),
    ],
)
def test_unfinished_characters_at_the_end(data: bytes, incomplete: int) -> None:
    assert _incomplete(data) == incomplete
