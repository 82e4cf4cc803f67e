"""What a command writes where nobody may read: stderr that never fails a write, and
stdout that can be let go of quietly."""

from __future__ import annotations

import contextlib
import io
import os
import select
import sys
from collections.abc import Iterator

__all__ = ["discard", "flush_stdout", "only_broken_pipes", "print_stderr", "tolerant_stderr"]


def discard(stream: object) -> None:
    """Point the file descriptor of ``stream`` (``sys.stdout``, ``sys.stderr``) at the
    null device, so that what is written to it from now on, and what is still
    buffered, is dropped without an error. Does nothing for a stream without a file
    descriptor (a test's capture)."""
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def print_stderr(text: str) -> None:
    """Print ``text`` and a newline to stderr, flushed; it never raises: when stderr
    cannot be written (its reader went away), it is :func:`discard`\\ ed, so this line
    and every later write to it are dropped instead of failing."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe; a closed file
        discard(sys.stderr)


def flush_stdout() -> None:
    """Flush ``sys.stdout``; when its reader went away, :func:`discard` it instead of
    raising."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        discard(sys.stdout)


def only_broken_pipes(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``BrokenPipeError``, or a group of nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return all(only_broken_pipes(inner) for inner in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


class _Tolerant(io.RawIOBase):
    """File descriptor ``fd`` for writing; when a write fails (the pipe's reader went
    away), the descriptor is pointed at the null device and the bytes count as
    written."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)

    def write(self, data: object) -> int:
        """Write all of ``data`` (as a blocking descriptor would: a non-blocking one
        that is full is waited on)."""
        view = memoryview(data).cast("B")  # type: ignore[arg-type]
        done = 0
        try:
            while done < len(view):
                try:
                    done += os.write(self.fd, view[done:])
                except BlockingIOError:
                    select.select([], [self.fd], [])
        except OSError:
            discard(self)
        return len(view)


@contextlib.contextmanager
def tolerant_stderr() -> Iterator[None]:
    """For the block, ``sys.stderr`` (when it is the process's own, file descriptor 2)
    never fails a write: when its reader goes away, what is written to it is dropped.
    What dsh reports on stderr is for a person; a person who stopped reading it must
    not stop dsh (a run whose answers still go to stdout, a shutdown)."""
    original = sys.stderr
    try:
        fd = original.fileno()
    except (AttributeError, OSError, ValueError):  # a test's capture
        fd = -1
    if fd != 2:
        yield
        return
    original.flush()
    # Unbuffered, as Python's own stderr: each write reaches the descriptor at once.
    sys.stderr = io.TextIOWrapper(
        _Tolerant(fd),
        encoding=original.encoding,
        errors=original.errors,
        line_buffering=bool(original.line_buffering),
        write_through=True,
    )
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stderr = original
