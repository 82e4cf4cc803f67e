"""Decoding a stream of server-sent events: the framing, the stream's failures, and the
base of a provider's decoder."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from ._types import Chunk, Finish, FinishReason, LlmFailure, Usage, UsageChunk

__all__ = [
    "BadResponse",
    "DecoderBase",
    "EventDecoder",
    "ServerStreamError",
    "StreamError",
    "int_field",
    "str_field",
]


class StreamError(Exception):
    """The stream cannot go on; ``code`` is the failure code to report."""

    code = "BAD_RESPONSE"


class BadResponse(StreamError):
    """A ``data:`` payload is not what the provider's stream sends."""


class ServerStreamError(StreamError):
    """The server reported an error instead of the next event."""

    code = "SERVER_ERROR"


class _NoEvents(StreamError):
    """A successful response whose body holds no server-sent event."""


class _Overflow(StreamError):
    """A successful response without an event for a request the size of the window."""

    code = "CONTEXT_LENGTH"


def int_field(value: Any, what: str) -> int:
    """``value`` if it is an ``int`` (not a bool), else :class:`BadResponse` naming ``what``."""
    if type(value) is not int:
        raise BadResponse(f"{what} is {value!r}, not an integer")
    return value


def str_field(value: Any, what: str) -> str:
    """``value`` if it is a ``str``, else :class:`BadResponse` naming ``what``."""
    if type(value) is not str:
        raise BadResponse(f"{what} is {value!r}, not a string")
    return value


class EventDecoder(Protocol):
    """A provider's state machine from decoded events to chunks (see :class:`DecoderBase`)."""

    def feed(self, payload: Any, out: list[Chunk], event: str = "message") -> bool:
        """Take the JSON ``payload`` of one event named ``event``, appending chunks to
        ``out``; return True when the stream is complete (nothing further is read).
        Raises :class:`StreamError` when the stream cannot go on."""
        ...

    def end(self, out: list[Chunk]) -> Finish:
        """The body ended: append the usage (if any) and the finish; return the finish."""
        ...

    def fail(self, failure: LlmFailure, out: list[Chunk]) -> None:
        """The stream broke: append the usage (if any) and an error finish."""
        ...


class DecoderBase:
    """What decoders share: the usage and the finish are held back until :meth:`end`, so
    usage always precedes the finish and nothing follows it; :meth:`_stopped` turns the
    provider's stop reason into the finish."""

    #: The wire field that says why the model stopped (named in failure messages).
    reason_field: ClassVar[str] = "finish_reason"
    #: What a stream cut short never sent (named in its failure message).
    end_field: ClassVar[str] = "finish_reason"

    __slots__ = ("_content", "_finish", "_request_id", "_usage")

    def __init__(self, request_id: str | None = None) -> None:
        self._request_id = request_id  # carried by the failures this decoder reports
        self._usage: Usage | None = None
        self._finish: Finish | None = None
        self._content = False  # saw text or a tool call

    def _failure(self, message: str, code: str) -> Finish:
        return Finish("error", LlmFailure(message, code, request_id=self._request_id))

    def _stopped(self, reason: str, kind: FinishReason | None) -> None:
        """The model stopped with ``reason``, which means ``kind`` (None: not a success)."""
        if kind is None:
            code = "".join(c if c.isalnum() else "_" for c in reason).upper() or "UNKNOWN"
            message = f'the model stopped with {self.reason_field} "{reason}"'
            self._finish = self._failure(message, code)
        elif kind != "max-tokens" and not self._content:
            message = "the model returned an empty answer (no text and no tool calls)"
            self._finish = self._failure(message, "EMPTY_RESPONSE")
        else:
            self._finish = Finish(kind)

    def end(self, out: list[Chunk]) -> Finish:
        """The stream is over: append the usage (if any) and the finish; return the finish.

        Before the model finished (:attr:`end_field`), the finish is ``error``
        ``STREAM_INTERRUPTED``, and the open blocks stay open.
        """
        if self._usage is not None:
            out.append(UsageChunk(self._usage))
        finish = self._finish or self._failure(
            f"the stream ended before the model finished (no {self.end_field})",
            "STREAM_INTERRUPTED",
        )
        out.append(finish)
        return finish

    def fail(self, failure: LlmFailure, out: list[Chunk]) -> None:
        """The stream broke: append the usage (if any) and an error finish."""
        if self._usage is not None:
            out.append(UsageChunk(self._usage))
        out.append(Finish("error", failure))


class _Events:
    """Server-sent events, one line at a time: ``data:`` (with or without the space,
    several joined by ``\\n``), ``event:``, comments and other fields ignored; a blank
    line dispatches."""

    __slots__ = ("_data", "_done", "_event", "count", "first")

    def __init__(self, done_marker: str | None) -> None:
        self._data: str | None = None
        self._done = done_marker
        self._event = "message"
        self.count = 0  # events dispatched, the done marker aside
        self.first = ""  # the first line that is not SSE, for a useless body's message

    def line(self, line: str) -> tuple[str, str] | None:
        """Take one line; return ``(event, data)`` when it completes an event."""
        if line.startswith("data:"):
            value = line[6:] if line.startswith("data: ") else line[5:]
            self._data = value if self._data is None else f"{self._data}\n{value}"
        elif line.startswith("event:"):
            self._event = line[6:].strip() or "message"
        elif not line:
            return self.flush()
        elif not self.first and not line.startswith(":"):
            self.first = line
        return None

    def flush(self) -> tuple[str, str] | None:
        """The event being read (the body ended right after it), if any."""
        data, event = self._data, self._event
        self._data, self._event = None, "message"
        if data is None:
            return None
        if data != self._done:
            self.count += 1
        return event, data
