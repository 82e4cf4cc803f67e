"""A scripted chat-completions server on loopback, and helpers to call it through dsh.

``server`` runs a stdlib ``ThreadingHTTPServer`` on 127.0.0.1:0 in a daemon thread.
Tests queue replies (``server.stream(...)``, ``server.reply(...)``, ``server.hang_up()``);
each request takes the next one. The server records every request and notices when a
client goes away. Nothing here patches the HTTP client: the adapter talks real HTTP.
"""

from __future__ import annotations

import gc
import json
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, asynccontextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from dsh import Context
from dsh_llm import Chunk, Llm, LlmRequest, Message
from dsh_llm_openai import OpenAICompatible


@dataclass
class Recorded:
    """One request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    client: tuple[str, int]  # the client's address: one per connection


class _Action:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


#: Close the connection at once, without ending the chunked body.
DROP = _Action("drop")
#: Send nothing more until the test ends (``server.release`` is set at teardown).
STALL = _Action("stall")
#: Send nothing more; wait until the client closes the connection, and record that.
HOLD = _Action("hold")


@dataclass
class _Reply:
    status: int | None  # None: hang up without answering
    headers: dict[str, str] = field(default_factory=dict)
    events: tuple[Any, ...] = ()  # streamed in chunked encoding
    body: bytes | None = None  # sent with Content-Length instead
    stall_first: bool = False  # stall before the status line


def _frame(event: Any) -> bytes:
    if isinstance(event, bytes):
        return event
    if isinstance(event, str):
        if event.startswith(":"):
            return f"{event}\n\n".encode()
        return f"data: {event}\n\n".encode()
    return f"data: {json.dumps(event)}\n\n".encode()


def llama_cpp_problems(messages: list[Any]) -> list[str]:
    """What llama-cpp-python's server refuses in a request's messages: every message
    needs a string ``content`` (an assistant message that only calls tools too: null
    or a missing key are validation errors), a known role, and a tool message needs
    the id of a call made before it."""
    problems: list[str] = []
    called: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            problems.append(f"messages.{i}.role: unknown role {role!r}")
        if not isinstance(message.get("content"), str):
            problems.append(f"messages.{i}.content: Input should be a valid string")
        for call in message.get("tool_calls") or ():
            called.add(call["id"])
        if role == "tool" and message.get("tool_call_id") not in called:
            problems.append(f"messages.{i}.tool_call_id: no earlier tool call has this id")
    return problems


class LoopbackServer:
    """The scripted server; see the module docstring."""

    DROP = DROP
    STALL = STALL
    HOLD = HOLD

    def __init__(self) -> None:
        #: Validate message shapes as llama-cpp-python's server does: a request that
        #: breaks them is answered 500 with the validation errors (and not scripted).
        self.strict = False
        #: Answer 400 "maximum context length" to a request whose messages hold more
        #: characters than this (None: no limit).
        self.context_chars: int | None = None
        self.requests: list[Recorded] = []
        self.replies: deque[_Reply] = deque()
        #: Set when a handler notices that its client went away.
        self.disconnected = threading.Event()
        #: Set at teardown: stalled handlers go on (and find their client gone).
        self.release = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"owner": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        host, port = self.httpd.server_address[:2]
        self.root = f"http://{host!s}:{port}"
        #: The ``base_url`` to configure.
        self.url = f"{self.root}/v1"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    # -- scripting -----------------------------------------------------------------------

    def stream(
        self, *events: Any, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        """Queue a streamed reply: dicts become ``data: <json>`` frames, ``"[DONE]"`` the
        end marker, ``": text"`` a comment, bytes go out raw; ``DROP``, ``STALL`` and
        ``HOLD`` act as documented."""
        all_headers = {"Content-Type": "text/event-stream"}
        all_headers.update(headers or {})
        self.replies.append(_Reply(status, all_headers, events))

    def reply(self, status: int, body: Any = b"", headers: dict[str, str] | None = None) -> None:
        """Queue a plain reply (a dict is sent as JSON)."""
        all_headers = dict(headers or {})
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            all_headers.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        self.replies.append(_Reply(status, all_headers, body=body))

    def hang_up(self) -> None:
        """Queue a reply that closes the connection without a response."""
        self.replies.append(_Reply(None))

    def stall(self) -> None:
        """Queue a reply that never sends its status line."""
        self.replies.append(_Reply(200, stall_first=True))

    async def wait_disconnect(self) -> None:
        """Wait until a handler saw its client go away."""
        seen = await anyio.to_thread.run_sync(self.disconnected.wait, 10.0)
        assert seen, "the server never saw the client disconnect"

    # -- frame builders ------------------------------------------------------------------

    @staticmethod
    def delta(
        content: str | None = None,
        *,
        reasoning: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        finish: str | None = None,
        usage: dict[str, Any] | None = None,
        role: str | None = None,
    ) -> dict[str, Any]:
        """A ``chat.completion.chunk`` with one choice."""
        delta: dict[str, Any] = {}
        if role is not None:
            delta["role"] = role
        if content is not None:
            delta["content"] = content
        if reasoning is not None:
            delta["reasoning_content"] = reasoning
        if tool_calls is not None:
            delta["tool_calls"] = tool_calls
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": usage,
        }

    @staticmethod
    def tool(
        index: int,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str | None = None,
    ) -> dict[str, Any]:
        """One tool-call fragment (the id and name belong on the first)."""
        call: dict[str, Any] = {"index": index}
        function: dict[str, Any] = {}
        if id is not None:
            call["id"] = id
            call["type"] = "function"
        if name is not None:
            function["name"] = name
        if arguments is not None:
            function["arguments"] = arguments
        if function:
            call["function"] = function
        return call

    @staticmethod
    def usage(
        prompt: int, completion: int, *, cached: int | None = None, reasoning: int | None = None
    ) -> dict[str, Any]:
        """The usage-only final chunk (``choices: []``), OpenAI style."""
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if reasoning is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": usage,
        }

    # -- calling it through dsh ----------------------------------------------------------

    def config(self, **overrides: Any) -> dict[str, Any]:
        """An ``llm-openai`` config for this server: key ``sk-test``, model ``test-model``,
        no backoff, short timeouts."""
        config: dict[str, Any] = {
            "api_key": "sk-test",
            "base_url": self.url,
            "models": ["test-model"],
            "retry_backoff": 0,
            "connect_timeout": 5,
            "read_timeout": 5,
        }
        config.update(overrides)
        return config

    @asynccontextmanager
    async def llm(self, **overrides: Any) -> AsyncIterator[Llm]:
        """The ``llm`` service of a fresh runtime with the adapter mounted."""
        async with Context() as root:
            await root.plugin(Llm)
            await root.plugin(OpenAICompatible, self.config(**overrides))
            service: Llm = root.llm
            yield service

    async def run(self, request: LlmRequest | str = "hi", **overrides: Any) -> list[Chunk]:
        """Every chunk ``Llm.stream`` yields for ``request`` (a str: one user message)."""
        if isinstance(request, str):
            request = LlmRequest(model="test-model", messages=(Message.user(request),))
        async with self.llm(**overrides) as llm, aclosing(llm.stream(request)) as stream:
            return [chunk async for chunk in stream]

    # -- internals -----------------------------------------------------------------------

    def _refusal(self, body: Any) -> _Reply | None:
        """The answer of a server that validates what it is sent (see ``strict`` and
        ``context_chars``), or None when the request passes."""
        messages = body.get("messages", []) if isinstance(body, dict) else []
        if self.strict:
            problems = llama_cpp_problems(messages)
            if problems:
                detail = json.dumps({"detail": problems}).encode()
                return _Reply(500, {"Content-Type": "application/json"}, body=detail)
        if self.context_chars is not None:
            size = sum(len(str(m.get("content") or "")) for m in messages)
            if size > self.context_chars:
                error = {
                    "error": {
                        "message": f"This model's maximum context length is "
                        f"{self.context_chars} tokens; your request has {size}",
                        "type": "invalid_request_error",
                    }
                }
                data = json.dumps(error).encode()
                return _Reply(400, {"Content-Type": "application/json"}, body=data)
        return None

    def _next(self) -> _Reply:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        return _Reply(500, {"Content-Type": "application/json"}, body=b'{"error": "unscripted"}')

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._sockets.add(sock)
            else:
                self._sockets.discard(sock)

    def close(self) -> None:
        self.release.set()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle(self) -> None:
        with suppress(OSError):  # the client reset the connection between requests
            super().handle()

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection, True)

    def finish(self) -> None:
        self.owner._track(self.connection, False)
        with suppress(OSError):
            super().finish()

    def do_POST(self) -> None:
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        headers = {key.lower(): value for key, value in self.headers.items()}
        client = (str(self.client_address[0]), int(self.client_address[1]))
        owner.requests.append(Recorded(self.command, self.path, headers, body, client))
        reply = owner._refusal(body) or owner._next()
        try:
            self._answer(reply)
        except OSError:  # the client went away (broken pipe, reset)
            owner.disconnected.set()
            self.close_connection = True

    def _hang_up(self) -> None:
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, reply: _Reply) -> None:
        if reply.stall_first:
            self.owner.release.wait()
        if reply.status is None:
            self._hang_up()
            return
        self.send_response(reply.status)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        if reply.body is not None:
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in reply.events:
            if event is DROP:
                self._hang_up()
                return
            if event is STALL:
                self.owner.release.wait()
                continue
            if event is HOLD:
                # The client sends nothing while it reads a response: a read returns
                # only when it closes the connection.
                if not self.rfile.read(1):
                    self.owner.disconnected.set()
                self.close_connection = True
                return
            data = _frame(event)
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect cycles before a test ends, so any warning a collected object raises is
    reported against (and filtered by the marks of) the test that made it."""
    yield
    gc.collect()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    """A scripted chat-completions server on loopback (stopped at teardown)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    loopback = LoopbackServer()
    try:
        yield loopback
    finally:
        loopback.close()
