"""The records of the bash seam: a request, its result, and a command while it runs."""

from __future__ import annotations

import signal as signals
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._capture import StreamCapture

__all__ = [
    "BashExecutor",
    "BashRequest",
    "BashResult",
    "BashRun",
    "BashSandbox",
    "StreamOutput",
    "join_parts",
    "signal_name",
]


@dataclass(frozen=True)
class StreamOutput:
    """What a result keeps of one stream.

    ``text`` is the whole stream, or its tail when ``truncated`` (the stream wrote
    more than the executor keeps in memory); ``spill_path`` is then the file holding
    the whole stream (None when none could be kept).
    """

    text: str
    truncated: bool = False
    spill_path: str | None = None


@dataclass(frozen=True)
class BashResult:
    """How a command ended and what it wrote.

    ``exit_code`` is set when the shell exited, ``signal`` (``"SIGTERM"``, …) when a
    signal killed it. ``timed_out`` and ``aborted`` (the caller's cancellation was
    observed and recorded) exclude each other: the first cause wins. ``timeout_ms`` is
    the timeout that applied (None: none).
    """

    exit_code: int | None
    signal: str | None
    timed_out: bool
    aborted: bool
    stdout: StreamOutput
    stderr: StreamOutput
    timeout_ms: int | None = None


@dataclass
class BashRun:
    """A command that has started: its process id, its two streams as they fill, and
    its result once it has ended (also when it was cancelled: ``aborted``)."""

    pid: int
    stdout: StreamCapture
    stderr: StreamCapture
    result: BashResult | None = None


@dataclass(frozen=True)
class BashRequest:
    """One command for ``bash -c``.

    ``cwd`` is its working directory (None: the process's); ``timeout_ms`` None means
    the executor's default and 0 no timeout at all; ``env`` holds variables added after
    the executor scrubbed the environment; ``session_id`` is the calling agent's
    session (``DSH_SESSION_ID``); ``on_start`` is called with the :class:`BashRun` as
    soon as the process exists (a background job reads its output through it).
    ``session_cwd`` is the calling agent's working directory (a sandboxing executor's
    default writable root; None: ``cwd``, else the process's); ``unsandboxed`` runs the
    command outside the executor's sandbox (the caller has had a person allow it).
    """

    command: str
    cwd: str | None = None
    timeout_ms: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    session_id: str | None = None
    on_start: Callable[[BashRun], None] | None = None
    session_cwd: str | None = None
    unsandboxed: bool = False


@dataclass(frozen=True)
class BashSandbox:
    """How an executor confines the commands it runs, provided at ctx key
    ``bash_sandbox`` while it does (``bash-local`` with ``sandbox`` on): the tool
    offers ``unsandboxed`` and tells the model what the sandbox allows.

    ``mode`` is ``"read-only"`` or ``"workspace-write"``; ``writable_roots`` are the
    roots as configured (a relative one is taken from the session's working
    directory, ``"."`` being that directory itself; unused in ``read-only``);
    ``network`` says whether commands may use the network; ``deny_read`` holds the
    globs of the files commands cannot read.
    """

    mode: str
    writable_roots: tuple[str, ...] = ()
    network: bool = False
    deny_read: tuple[str, ...] = ()


class BashExecutor(Protocol):
    """What runs the commands (``bash-local``, or a sandboxing executor)."""

    @property
    def max_timeout_ms(self) -> int:
        """The longest timeout a request may ask for."""

    async def run(self, request: BashRequest) -> BashResult:
        """Run ``request`` and return its result. Cancellation of the caller kills the
        command's process group, records the result (``aborted``) on the
        :class:`BashRun` and propagates."""


def signal_name(number: int) -> str:
    """``signal.Signals(number).name``, or ``SIG<number>`` for a number it does not name
    (a real-time signal)."""
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def join_parts(parts: Iterable[str]) -> str:
    """``parts`` joined by one newline, none after a part that already ends with one
    (how tool results made of a command's output read)."""
    text = ""
    for part in parts:
        if text and not text.endswith("\n"):
            text += "\n"
        text += part
    return text
