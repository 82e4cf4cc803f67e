"""The stdio transport of a command server: its process started under dsh's lifeline.

The ``mcp`` package's ``stdio_client`` starts the process itself and does not hand it
out, so its process group could not be watched (RFC 0024); this transport starts it
with :func:`dsh.lifeline.open_process` and speaks the same framing (one JSON-RPC message
a line) and shutdown sequence (stdin closed, then SIGTERM and SIGKILL to the group).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TypeAlias

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from anyio.streams.text import TextReceiveStream
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from dsh.lifeline import open_process, reap

from ._errors import McpNotAServerError
from ._stderr import StderrLog

__all__ = ["GRACE", "stdio"]

#: How long the server may take to exit after its stdin is closed, and after SIGTERM.
GRACE = 2.0
#: How many characters of a line a message quotes.
_QUOTED = 60

Inbound: TypeAlias = MemoryObjectReceiveStream[SessionMessage | Exception]
Outbound: TypeAlias = MemoryObjectSendStream[SessionMessage]


@contextlib.asynccontextmanager
async def stdio(
    command: str, args: list[str], env: Mapping[str, str], cwd: Path | None, errors: StderrLog
) -> AsyncIterator[tuple[Inbound, Outbound]]:
    """Run ``command args`` (a new process group, watched) and yield the streams of its
    messages: what it writes (a later line that is not a message arrives as the error;
    a first one that is not what a server sends raises :class:`McpNotAServerError`) and
    what to send it; its stderr goes to ``errors``. On exit it is shut down: stdin
    closed, SIGTERM to its group after :data:`GRACE` (at once when the body raised),
    SIGKILL after another; what the group still holds is killed."""
    process = await open_process(
        [command, *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    inbound_writer, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbound, outbound_reader = anyio.create_memory_object_stream[SessionMessage](0)
    patient = False
    # stderr is read until its end, after the shutdown too (what a server says as it
    # exits is its log's last word), for GRACE at most once the process is gone.
    drained = anyio.Event()
    try:
        async with anyio.create_task_group() as outer:
            outer.start_soon(_drain, process.stderr, errors, drained)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_read, process.stdout, inbound_writer)
                    tg.start_soon(_write, outbound_reader, process.stdin)
                    try:
                        yield inbound, outbound
                        patient = True
                    finally:
                        tg.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    await _shut(process, patient=patient)
                    with anyio.move_on_after(GRACE):
                        await drained.wait()
                outer.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for stream in (inbound_writer, inbound, outbound, outbound_reader):
                await stream.aclose()
            await reap(process)


async def _read(
    stdout: ByteReceiveStream, sink: MemoryObjectSendStream[SessionMessage | Exception]
) -> None:
    # The session may have closed its end first: then nothing waits for the rest.
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await _lines(stdout, sink)


async def _drain(stderr: ByteReceiveStream, errors: StderrLog, drained: anyio.Event) -> None:
    try:
        async for chunk in stderr:
            await errors.write(chunk)
    finally:
        with anyio.CancelScope(shield=True):
            await errors.aclose()
        drained.set()


def _quoted(line: str) -> str:
    """``line`` as a message quotes it: JSON-escaped, cut to 60 characters."""
    text = line if len(line) <= _QUOTED else line[: _QUOTED - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def _first(line: str, message: SessionMessage | Exception) -> None:
    """Raise :class:`McpNotAServerError` when the first line a command wrote is not what
    an MCP server sends first: JSON-RPC, and no request only a client makes."""
    if isinstance(message, Exception):
        raise McpNotAServerError(
            f"not an MCP server (its first output line is not JSON-RPC: {_quoted(line)})"
        )
    request = message.message.root
    if isinstance(request, types.JSONRPCRequest):
        try:
            types.ServerRequest.model_validate({"method": request.method, "params": request.params})
        except ValidationError:
            raise McpNotAServerError(
                f'not an MCP server (its first output line is the request "{request.method}", '
                "which only a client sends: does it repeat its input?)"
            ) from None


async def _lines(
    stdout: ByteReceiveStream, sink: MemoryObjectSendStream[SessionMessage | Exception]
) -> None:
    async with sink:
        pending = ""
        first = True
        async for chunk in TextReceiveStream(stdout):
            *lines, pending = (pending + chunk).split("\n")
            for line in lines:
                try:
                    message: SessionMessage | Exception = SessionMessage(
                        types.JSONRPCMessage.model_validate_json(line)
                    )
                except ValidationError as exc:
                    message = exc
                if first:
                    _first(line, message)
                    first = False
                await sink.send(message)


async def _write(source: MemoryObjectReceiveStream[SessionMessage], stdin: ByteSendStream) -> None:
    # A server that exited (a broken pipe) is noticed by the reader: its stdout ends.
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError), source:
        async for message in source:
            line = message.message.model_dump_json(by_alias=True, exclude_none=True)
            await stdin.send(f"{line}\n".encode())


async def _shut(process: Process, *, patient: bool) -> None:
    """Close stdin and wait for the exit (for :data:`GRACE` when ``patient``), then
    SIGTERM to the group, SIGKILL after :data:`GRACE`; then SIGKILL to whatever the
    group still holds."""
    assert process.stdin is not None
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if patient:
        with anyio.move_on_after(GRACE):
            await process.wait()
    if process.returncode is None:
        _signal_group(process.pid, signal.SIGTERM)
        with anyio.move_on_after(GRACE):
            await process.wait()
    if process.returncode is None:
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()
    _signal_group(process.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
