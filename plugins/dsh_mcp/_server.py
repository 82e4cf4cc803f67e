"""One MCP server: its connection, kept up with reconnects, and the tool calls made on it.

This module imports the ``mcp`` package; the plugin imports it when it starts, so
``import dsh_mcp`` stays cheap and a missing extra is a clear load error.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, types
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.shared.message import SessionMessage
from mcp.types import CONNECTION_CLOSED

from dsh_tools import ToolResult

from ._config import McpConfig, McpServerConfig
from ._errors import MCP_DISCONNECTED, MCP_TIMEOUT, MCP_TOOL_ERROR
from ._results import render
from ._stderr import StderrLog
from ._stdio import stdio

__all__ = ["McpServer", "backoff"]

_Inbound: TypeAlias = MemoryObjectReceiveStream[SessionMessage | Exception]
_Outbound: TypeAlias = MemoryObjectSendStream[SessionMessage]
_InboundWriter: TypeAlias = MemoryObjectSendStream[SessionMessage | Exception]


def backoff(initial_ms: int, max_ms: int) -> Iterator[int]:
    """The waits between reconnect attempts, in ms: ``initial_ms``, then doubling up to
    ``max_ms``, which repeats."""
    delay = initial_ms
    while True:
        yield delay
        delay = min(delay * 2, max_ms)


def _reason(exc: BaseException) -> str:
    """One line saying why a connection failed (the first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    if isinstance(exc, McpError):
        if exc.error.code == CONNECTION_CLOSED:
            return "the server closed the connection (a command server: it exited)"
        return exc.error.message
    text = str(exc)
    if isinstance(exc, OSError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(eq=False)
class _Connection:
    """One session with the server; a reconnect makes a new one."""

    session: ClientSession
    #: The cancel scopes of the calls running on it, cancelled when it is lost.
    calls: set[anyio.CancelScope] = field(default_factory=set)
    lost: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)

    def lose(self) -> bool:
        """Mark it lost and stop its calls; False when it was lost already."""
        if self.lost:
            return False
        self.lost = True
        for scope in self.calls:
            scope.cancel()
        self.done.set()
        return True


class McpServer:
    """One configured server, as the ``mcp`` plugin runs it.

    :meth:`run` (a task of the plugin) starts it, lists its tools, and keeps it
    connected: after a crash it reconnects with backoff. :meth:`call` calls one of its
    tools. :meth:`stop` shuts it down (closing stdin, then signals, for a process).
    """

    def __init__(
        self,
        name: str,
        spec: McpServerConfig,
        settings: McpConfig,
        *,
        where: str,
        base: Path,
        logger: logging.Logger,
    ) -> None:
        #: The server's name in the config (part of its tools' names).
        self.name = name
        #: Its config entry.
        self.spec = spec
        #: ``<file>:<line>`` of its entry in the deployment (empty when not from YAML).
        self.where = where
        #: The tools it listed when it first started (a reconnect does not list again).
        self.tools: list[types.Tool] = []
        #: Set once it has started or failed to start.
        self.started = anyio.Event()
        #: Why it did not start (None when it started).
        self.failure: str | None = None
        #: How many sessions it has had: 1 after the start, one more per reconnect.
        self.connections = 0
        #: Set when :meth:`run` has returned (after :meth:`stop`, or a failed start).
        self.finished = anyio.Event()
        self._settings = settings
        self._base = base
        self._logger = logger
        self._conn: _Connection | None = None
        self._up = anyio.Event()
        self._closed = False
        self._attempt = anyio.CancelScope()

    @property
    def connected(self) -> bool:
        """Whether a session is up now."""
        return self._conn is not None

    @property
    def closed(self) -> bool:
        """Whether it has been stopped (or failed to start): no more sessions."""
        return self._closed

    def _stopped(self) -> bool:
        # A call, not an attribute: a type checker keeps an attribute's narrowing
        # across an await.
        return self._closed

    def _say(self, message: str) -> str:
        prefix = f"{self.where}: " if self.where else ""
        return f'{prefix}MCP server "{self.name}" {message}'

    # -- the connection -----------------------------------------------------------------

    async def run(self) -> None:
        """Start the server and keep it connected until :meth:`stop`."""
        settings = self._settings
        delays = backoff(settings.reconnect_initial_ms, settings.reconnect_max_ms)
        try:
            while not self.closed:
                with anyio.CancelScope() as self._attempt:
                    before = self.connections
                    try:
                        await self._connect()
                        reason = "the server closed the connection"
                    except Exception as exc:
                        reason = _reason(exc)
                    if self._stopped():
                        return
                    if not self.started.is_set():
                        self.failure = reason
                        return
                    if self.connections != before:
                        delays = backoff(settings.reconnect_initial_ms, settings.reconnect_max_ms)
                        delay = next(delays)
                        what = f"disconnected: {reason}; reconnecting in {delay} ms"
                    else:
                        delay = next(delays)
                        what = f"failed to reconnect: {reason}; next attempt in {delay} ms"
                    self._logger.warning(self._say(what))
                    await anyio.sleep(delay / 1000)
        finally:
            self._closed = True
            self.started.set()
            self._up.set()
            self.finished.set()

    async def _connect(self) -> None:
        """One session: open the transport, initialize, list the tools the first time,
        then serve calls until the transport ends or :meth:`stop`."""
        async with self._transport() as (read, write):
            writer, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            # Every stream is closed here, whether or not the tasks reading them started.
            async with (
                read,
                writer,
                inbound,
                ClientSession(inbound, write) as session,
                anyio.create_task_group() as tg,
            ):
                conn = _Connection(session)
                tg.start_soon(self._pump, read, writer, conn)
                try:
                    limit = self._settings.startup_timeout_ms
                    with anyio.move_on_after(limit / 1000) as startup:
                        await session.initialize()
                        tools = await _list_tools(session)
                    if startup.cancelled_caught:
                        raise TimeoutError(f"it did not answer within {limit} ms")
                    self._conn = conn
                    self.connections += 1
                    if self.started.is_set():
                        self._logger.info(self._say("reconnected"))
                    else:
                        self.tools = tools
                        self.started.set()
                    self._up.set()
                    await conn.done.wait()
                finally:
                    self._lose(conn)
                tg.cancel_scope.cancel()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[tuple[_Inbound, _Outbound]]:
        spec = self.spec
        if spec.url is not None:
            return _http(spec.url, spec.headers, self._settings.tool_call_timeout_ms)
        assert spec.command is not None
        return stdio(
            spec.command,
            spec.args,
            {**get_default_environment(), **spec.env},
            None if spec.cwd is None else self._base / spec.cwd,
            StderrLog(self.name, self._logger),
        )

    async def _pump(self, read: _Inbound, writer: _InboundWriter, conn: _Connection) -> None:
        """Hand the server's messages to the session; when they end, the connection is
        lost (its calls are stopped before the session learns that the stream closed)."""
        async for message in read:
            await writer.send(message)
        self._lose(conn)
        await writer.aclose()

    def _lose(self, conn: _Connection) -> None:
        if conn.lose() and self._conn is conn:
            self._conn = None
            self._up = anyio.Event()

    def stop(self) -> None:
        """Shut the server down: a live session is closed as the protocol says (stdin
        closed, then SIGTERM and SIGKILL if it lingers); a start, reconnect or wait in
        progress is cancelled. Await :attr:`finished` for the end."""
        self._closed = True
        conn = self._conn
        if conn is not None:
            self._lose(conn)
        else:
            self._attempt.cancel()
        self._up.set()

    # -- calls --------------------------------------------------------------------------

    async def call(
        self, tool: str, arguments: dict[str, Any], *, timeout_ms: int | None = None
    ) -> ToolResult:
        """Call ``tool`` with ``arguments`` within ``timeout_ms`` (default: the config's
        ``tool_call_timeout_ms``), waiting for a reconnect first when the server is down.
        Never raises for the server's failures: they become error results
        (``MCP_TOOL_ERROR``, ``MCP_TIMEOUT``, ``MCP_DISCONNECTED``). A call cancelled by
        its deadline or its caller is cancelled at the server too
        (``notifications/cancelled``)."""
        limit = self._settings.tool_call_timeout_ms if timeout_ms is None else timeout_ms
        sent = False
        with anyio.move_on_after(limit / 1000):
            while (conn := self._conn) is None:
                if self._closed:
                    return _error(f'MCP server "{self.name}" is shut down', MCP_DISCONNECTED)
                await self._up.wait()
            session = conn.session
            # The id the session gives the request: call_tool takes it before it first
            # yields, so nothing can take it in between.
            request_id = session._request_id
            scope = anyio.CancelScope()
            conn.calls.add(scope)
            sent = True
            result: types.CallToolResult | None = None
            try:
                with scope:
                    result = await session.call_tool(tool, arguments)
            except McpError as exc:
                return _error(exc.error.message, MCP_TOOL_ERROR)
            except anyio.get_cancelled_exc_class():
                await _cancel_request(session, request_id)
                raise
            finally:
                conn.calls.discard(scope)
            if result is None:
                what = "shut down during the call"
                if not self._stopped():
                    what = "lost during the call (it is reconnecting)"
                return _error(f'MCP server "{self.name}" was {what}', MCP_DISCONNECTED)
            return render(result)
        waiting = "" if sent else " waiting for the server to reconnect"
        return _error(
            f'MCP tool "{tool}" of server "{self.name}" timed out after {limit} ms{waiting}',
            MCP_TIMEOUT,
        )


def _error(message: str, code: str) -> ToolResult:
    return ToolResult(f"Error: {message}", True, code)


async def _cancel_request(session: ClientSession, request_id: int) -> None:
    """Tell the server to stop working on ``request_id``; shielded, so it is sent even
    though the caller is being cancelled, and bounded, so a server that does not read
    cannot hold the caller."""
    notice = types.CancelledNotification(
        params=types.CancelledNotificationParams(requestId=request_id, reason="cancelled")
    )
    with (
        anyio.CancelScope(shield=True),
        anyio.move_on_after(1),
        contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError),
    ):
        await session.send_notification(types.ClientNotification(notice))


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool of the server, following the pagination cursor."""
    tools: list[types.Tool] = []
    params: types.PaginatedRequestParams | None = None
    while True:
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        if not page.nextCursor:
            return tools
        params = types.PaginatedRequestParams(cursor=page.nextCursor)


@contextlib.asynccontextmanager
async def _http(
    url: str, headers: dict[str, str], call_timeout_ms: int
) -> AsyncIterator[tuple[_Inbound, _Outbound]]:
    # A response stream stays open while a tool runs: reads may wait as long as a call.
    timeout = httpx.Timeout(30.0, read=max(300.0, call_timeout_ms / 1000))
    async with (
        httpx.AsyncClient(headers=headers, timeout=timeout) as client,
        streamable_http_client(url, http_client=client) as (read, write, _),
    ):
        yield read, write
