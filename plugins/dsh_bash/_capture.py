"""What a command writes to one stream: the tail in memory, the whole stream on disk.

Executors feed a :class:`StreamCapture` per stream as the bytes arrive. Memory holds
at most ``max_bytes`` of the most recent output (the tail: where errors and summaries
are); once a stream outgrows that, everything it wrote so far, and everything after,
goes to a spill file (up to ``spill_max_bytes``) in a private :class:`SpillFolder`.
Text is decoded as UTF-8 with replacement and never cut inside a character.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass

from ._types import StreamOutput

__all__ = ["OutputSlice", "SpillFolder", "StreamCapture"]

_log = logging.getLogger("dsh.bash")


class SpillFolder:
    """A folder of spill files, private to its owner: made on first use with an
    unpredictable name and mode 0700 (its files are 0600), removed by :meth:`remove`.

    ``parent`` is where it is made (default: the platform temp dir).
    """

    def __init__(self, parent: str | None = None) -> None:
        self.parent = parent
        self.path: str | None = None

    def new_file(self, prefix: str) -> tuple[int, str]:
        """A new, empty spill file: its open descriptor and its path. Raises
        ``OSError`` when the folder or the file cannot be made."""
        if self.path is None:
            self.path = tempfile.mkdtemp(prefix="dsh-bash-", dir=self.parent)
        return tempfile.mkstemp(prefix=f"{prefix}-", suffix=".log", dir=self.path)

    def remove(self) -> None:
        """Delete the folder and every spill file in it (a later file makes a new one)."""
        path, self.path = self.path, None
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class OutputSlice:
    """Text read from a stream since an offset (see :meth:`StreamCapture.read_since`).

    ``end`` is the offset to read from next; ``skipped`` counts the bytes after the
    requested offset that were no longer in memory (they are in the spill file).
    """

    text: str
    end: int
    skipped: int


class StreamCapture:
    """One stream of one command: ``write`` what arrives, then ``close``.

    ``size`` counts every byte written; ``spill_path`` is the spill file once the
    stream outgrew ``max_bytes`` (None before, or when no file could be made).
    """

    def __init__(
        self,
        name: str,
        *,
        max_bytes: int,
        spill_max_bytes: int,
        folder: SpillFolder | None,
    ) -> None:
        self.name = name
        self.max_bytes = max_bytes
        self.spill_max_bytes = spill_max_bytes
        self.size = 0
        self.spill_path: str | None = None
        self._folder = folder
        self._tail = bytearray()
        self._fd: int | None = None
        self._spilled = 0
        self._spilling = folder is not None and spill_max_bytes > 0

    def write(self, data: bytes) -> None:
        """Take the next bytes of the stream."""
        tail = self._tail
        tail += data
        self.size += len(data)
        if self.size <= self.max_bytes:
            return
        if self._spilling:
            if self._fd is None:
                # The first overflow: memory still holds the whole stream.
                self._open_spill(bytes(tail))
            else:
                self._spill(data)
        if len(tail) > 2 * self.max_bytes:
            del tail[: -self.max_bytes]

    def _open_spill(self, head: bytes) -> None:
        assert self._folder is not None
        try:
            self._fd, self.spill_path = self._folder.new_file(self.name)
        except OSError as exc:
            _log.warning("cannot keep the full %s of a command: %s", self.name, exc)
            self._spilling = False
            return
        self._spill(head)

    def _spill(self, data: bytes) -> None:
        fd = self._fd
        assert fd is not None
        room = self.spill_max_bytes - self._spilled
        view = memoryview(data)[:room]
        try:
            while view:
                written = os.write(fd, view)
                self._spilled += written
                view = view[written:]
        except OSError as exc:
            _log.warning(
                "the %s spill file %s stopped at an error: %s", self.name, self.spill_path, exc
            )
            self._close_spill()
            return
        if self._spilled >= self.spill_max_bytes:
            self._close_spill()

    def _close_spill(self) -> None:
        self._spilling = False
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        """The stream ended: close the spill file (its content stays)."""
        self._close_spill()

    @property
    def truncated(self) -> bool:
        """True when the stream wrote more than memory keeps."""
        return self.size > self.max_bytes

    def output(self) -> StreamOutput:
        """The kept text: the whole stream, or its tail (at most ``max_bytes``,
        starting at a character boundary) with the spill file's path."""
        if not self.truncated:
            return StreamOutput(self._tail.decode("utf-8", "replace"))
        tail = bytes(self._tail[-self.max_bytes :])
        text = tail[_continuations(tail) :].decode("utf-8", "replace")
        return StreamOutput(text, truncated=True, spill_path=self.spill_path)

    def read_since(self, offset: int, *, final: bool) -> OutputSlice:
        """The text written since byte ``offset``: what the kept tail (the last
        ``max_bytes``) holds of it, from a character boundary on. Unless ``final`` (the
        stream has ended), a character still incomplete at the end is left for the next
        read."""
        start = self.size - min(len(self._tail), self.max_bytes)
        skipped = 0
        if offset < start:
            skipped = start - offset
            offset = start
        data = bytes(self._tail[offset - self.size :] if offset < self.size else b"")
        if skipped:
            lead = _continuations(data)
            data = data[lead:]
            skipped += lead
            offset += lead
        if not final:
            data = data[: len(data) - _incomplete(data)]
        return OutputSlice(data.decode("utf-8", "replace"), offset + len(data), skipped)


def _continuations(data: bytes) -> int:
    """How many UTF-8 continuation bytes (at most 3) ``data`` starts with."""
    count = 0
    while count < min(3, len(data)) and data[count] & 0xC0 == 0x80:
        count += 1
    return count


def _incomplete(data: bytes) -> int:
    """How many bytes at the end of ``data`` begin a UTF-8 character not finished yet."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation: ASCII or the lead byte
            if byte < 0xC0:
                return 0
            needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return back if needed > back else 0
    return 0
