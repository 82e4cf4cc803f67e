"""The protocol's stdio for ``dsh acp``: a message transport of the
``agent-client-protocol`` package on two file descriptors of any kind.

asyncio's pipe transports refuse a regular file and cannot poll the null device, so
each direction has a daemon thread doing blocking reads or writes (daemon: a read that
never returns does not keep the process alive). Each input line is one JSON-RPC
message; a line that is not JSON is answered with a parse-error frame, one that is not
a JSON object (or has neither a method nor an id) with an invalid-request frame, and
logged in one line at INFO. The end
of a pipe, socket, terminal or the null device is the client leaving; the end of a
regular file is the end of a script, whose requests are answered first (docs/rfc/0028).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import stat
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from acp import RequestError

__all__ = ["CLIENT_GONE", "StdioTransport"]

T = TypeVar("T")

#: The message of the error a request to the client is answered with, by the
#: transport itself, once a script's input has ended (nobody is left to answer it).
CLIENT_GONE = "the client's input has ended: nobody can answer this request"


class _Worker:
    """A daemon thread running blocking calls for the event loop, one at a time in
    the order they were made."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((loop, future, fn, args))
        return await future

    def stop(self) -> None:
        """The thread ends once the calls made before this one are done."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            loop, future, fn, args = call
            try:
                outcome: tuple[str, Any] = ("set_result", fn(*args))
            except Exception as exc:
                outcome = ("set_exception", exc)
            try:
                loop.call_soon_threadsafe(_settle, future, *outcome)
            except RuntimeError:  # pragma: no cover - the loop closed meanwhile: nobody waits
                return


def _settle(future: asyncio.Future[Any], method: str, value: Any) -> None:
    if not future.cancelled():
        getattr(future, method)(value)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _key(message: dict[str, Any]) -> str:
    """The message's id as a set key (an id may be any JSON value)."""
    return json.dumps(message["id"], sort_keys=True)


def _is_request(message: dict[str, Any]) -> bool:
    return "method" in message and "id" in message


def _is_response(message: dict[str, Any]) -> bool:
    return "method" not in message and "id" in message


class StdioTransport:
    """An ``acp`` transport (``send``, ``receive``, ``close``) reading newline-delimited
    JSON-RPC from ``fd_in`` and writing it to ``fd_out``; problems are logged to
    ``logger``."""

    def __init__(self, fd_in: int, fd_out: int, logger: logging.Logger) -> None:
        self._input = os.fdopen(fd_in, "rb", closefd=False)
        self._fd_out = fd_out
        self._logger = logger
        #: A script: at its end, answer what it asked before ending.
        self._script = stat.S_ISREG(os.fstat(fd_in).st_mode)
        self._reader = _Worker("acp stdin")
        self._writer = _Worker("acp stdout")
        self._line = 0
        self._ended = False
        self._output_gone = False
        #: The ids of the client's requests not answered yet, and of ours to it.
        self._unanswered: set[str] = set()
        self._asked: dict[str, Any] = {}
        #: Answers to our requests made by the transport once the input has ended.
        self._replies: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        if _is_response(message):
            self._unanswered.discard(_key(message))
        elif _is_request(message):
            self._asked[_key(message)] = message["id"]
            if self._ended:
                self._refuse_asked()
        self._changed.set()
        if self._output_gone:
            return
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        try:
            await self._writer.run(_write_all, self._fd_out, data)
        except OSError as exc:
            self._output_gone = True
            self._logger.warning("the client's output is closed (%s): frames are dropped", exc)

    async def receive(self) -> dict[str, Any] | None:
        while not self._ended:
            line = await self._reader.run(self._input.readline)
            if not line:
                self._ended = True
                break
            self._line += 1
            message = await self._parse(line)
            if message is not None:
                if _is_request(message):
                    self._unanswered.add(_key(message))
                elif _is_response(message):
                    self._asked.pop(_key(message), None)
                return message
        if not self._script:
            return None
        self._refuse_asked()
        while not self._replies and self._unanswered:
            self._changed.clear()
            await self._changed.wait()
        return self._replies.pop(0) if self._replies else None

    async def close(self) -> None:
        """Waits for the frames sent before it to be written; leaves the descriptors
        open (the process ends next)."""
        await self._writer.run(lambda: None)
        self._writer.stop()
        self._reader.stop()

    async def _parse(self, line: bytes) -> dict[str, Any] | None:
        """The message of ``line``; None when it is blank or was refused."""
        if not line.strip():
            return None
        try:
            message = json.loads(line)
        except ValueError as exc:
            error = RequestError.parse_error({"line": self._line, "details": str(exc)})
            what = "is not JSON"
        else:
            if not isinstance(message, dict):
                details, what = "a message is a JSON object", "is not a JSON object"
            elif "method" in message or "id" in message:
                return message
            else:
                details, what = "a message has a method or an id", "has no method and no id"
            error = RequestError.invalid_request({"line": self._line, "details": details})
        self._logger.info(
            "line %d of the client's input %s: answered %d", self._line, what, error.code
        )
        await self.send({"jsonrpc": "2.0", "id": None, "error": error.to_error_obj()})
        return None

    def _refuse_asked(self) -> None:
        for request_id in self._asked.values():
            error = RequestError.internal_error({"details": CLIENT_GONE}).to_error_obj()
            self._replies.append({"jsonrpc": "2.0", "id": request_id, "error": error})
        self._asked.clear()
        self._changed.set()
