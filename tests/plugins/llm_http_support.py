"""A scripted model server on loopback for the HTTP adapters' tests (``llm-openai``,
``llm-anthropic``), and the helpers they share.

:class:`LoopbackServer` runs a :class:`tests.http_support.Loopback` server. Tests queue
replies (``server.stream(...)``, ``server.reply(...)``, ``server.hang_up()``); each
request takes the next one. The server records every request and notices when a client
goes away. Nothing here patches the HTTP client: the
adapter talks real HTTP. A provider's subclass names its plugin and the path of its API
root, and adds frame builders.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import anyio
import pytest

from dsh import ConfigError, Context
from dsh_llm import Chunk, Finish, Llm, LlmFailure, LlmRequest, Message
from dsh_llm.http import HttpModelPlugin
from tests.http_support import Loopback, QuietHandler

#: A stream the adapter stops reading early leaves httpx's nested body generators
#: unexhausted; trio warns when they are collected (encode/httpx#3686). The
#: connection itself is closed: the cancellation tests check the server sees it.
HTTPX_GC_WARNING = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)\.:ResourceWarning"
)


def final_failure(chunks: list[Chunk]) -> LlmFailure:
    """The failure of a stream's final ``Finish("error")`` chunk."""
    assert len(chunks) >= 1
    last = chunks[-1]
    assert isinstance(last, Finish)
    assert last.reason == "error", last
    assert last.failure is not None
    return last.failure


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
class Reply:
    """One scripted answer."""

    status: int | None  # None: hang up without answering
    headers: dict[str, str] = field(default_factory=dict)
    events: tuple[Any, ...] = ()  # streamed in chunked encoding
    body: bytes | None = None  # sent with Content-Length instead
    stall_first: bool = False  # stall before the status line

    @classmethod
    def json(cls, status: int, data: Any) -> Reply:
        """A plain JSON reply."""
        body = json.dumps(data).encode()
        return cls(status, {"Content-Type": "application/json"}, body=body)


def _frame(event: Any) -> bytes:
    if isinstance(event, bytes):
        return event
    if isinstance(event, str):
        if event.startswith(":"):
            return f"{event}\n\n".encode()
        return f"data: {event}\n\n".encode()
    return f"data: {json.dumps(event)}\n\n".encode()


class LoopbackServer:
    """The scripted server; see the module docstring."""

    DROP = DROP
    STALL = STALL
    HOLD = HOLD

    #: The adapter plugin :meth:`llm` mounts.
    plugin: ClassVar[type[HttpModelPlugin]]
    #: What the API root (:attr:`url`, the ``base_url`` to configure) adds to the root.
    api_root: ClassVar[str] = ""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.replies: deque[Reply] = deque()
        #: Fixed answers by ``(method, path)``, outside the script (a server's other
        #: endpoints, such as a context-window probe's); a GET elsewhere is a 404.
        self.routes: dict[tuple[str, str], Reply] = {}
        #: The requests :attr:`routes` (or a GET's 404) answered, apart from :attr:`requests`.
        self.probes: list[Recorded] = []
        #: Set when a handler notices that its client went away.
        self.disconnected = threading.Event()
        #: Set at teardown: stalled handlers go on (and find their client gone).
        self.release = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.http = Loopback(type("Handler", (_Handler,), {"owner": self}))
        self.root = self.http.root
        #: The ``base_url`` to configure.
        self.url = f"{self.root}{self.api_root}"

    # -- scripting -----------------------------------------------------------------------

    def stream(
        self, *events: Any, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        """Queue a streamed reply: dicts become ``data: <json>`` frames, a str a
        ``data:`` frame (``": text"`` a comment), bytes go out raw; ``DROP``, ``STALL``
        and ``HOLD`` act as documented."""
        all_headers = {"Content-Type": "text/event-stream"}
        all_headers.update(headers or {})
        self.replies.append(Reply(status, all_headers, events))

    def reply(self, status: int, body: Any = b"", headers: dict[str, str] | None = None) -> None:
        """Queue a plain reply (a dict is sent as JSON)."""
        all_headers = dict(headers or {})
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            all_headers.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        self.replies.append(Reply(status, all_headers, body=body))

    def hang_up(self) -> None:
        """Queue a reply that closes the connection without a response."""
        self.replies.append(Reply(None))

    def stall(self) -> None:
        """Queue a reply that never sends its status line."""
        self.replies.append(Reply(200, stall_first=True))

    async def wait_disconnect(self) -> None:
        """Wait until a handler saw its client go away."""
        seen = await anyio.to_thread.run_sync(self.disconnected.wait, 10.0)
        assert seen, "the server never saw the client disconnect"

    @property
    def endpoint(self) -> str:
        """The URL the adapter posts to."""
        return f"{self.url}{self.plugin.Adapter.path}"

    def ok(self, text: str = "ok") -> None:
        """Queue a short successful answer: ``text``, then the finish ``stop``."""
        raise NotImplementedError

    def partial(self, text: str) -> list[Any]:
        """The frames of an answer that stops right after its first text, ``text``
        (chunks ``BlockStart(0, "text")``, ``TextDelta(0, text)``)."""
        raise NotImplementedError

    def refusal(self, body: Any) -> Reply | None:
        """The answer of a server that validates what it is sent before the script
        answers, or None when the request passes (this one never refuses)."""
        del body
        return None

    # -- calling it through dsh ----------------------------------------------------------

    def config(self, **overrides: Any) -> dict[str, Any]:
        """An adapter config for this server: key ``sk-test``, model ``test-model``, no
        backoff, short timeouts."""
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
            await root.plugin(self.plugin, self.config(**overrides))
            service: Llm = root.llm
            yield service

    async def run(self, request: LlmRequest | str = "hi", **overrides: Any) -> list[Chunk]:
        """Every chunk ``Llm.stream`` yields for ``request`` (a str: one user message)."""
        if isinstance(request, str):
            request = LlmRequest(model="test-model", messages=(Message.user(request),))
        async with self.llm(**overrides) as llm, aclosing(llm.stream(request)) as stream:
            return [chunk async for chunk in stream]

    # -- internals -----------------------------------------------------------------------

    def _next(self) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        return Reply.json(500, {"error": "unscripted"})

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
        self.http.close()


class _Handler(QuietHandler):
    owner: LoopbackServer

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection, True)

    def finish(self) -> None:
        self.owner._track(self.connection, False)
        with suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        self.do_POST()

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
        seen = Recorded(self.command, self.path, headers, body, client)
        route = owner.routes.get((self.command, self.path))
        if route is not None or self.command == "GET":
            owner.probes.append(seen)
            reply = route or Reply.json(404, {"detail": "Not Found"})
        else:
            owner.requests.append(seen)
            reply = owner.refusal(body) or owner._next()
        try:
            self._answer(reply)
        except OSError:  # the client went away (broken pipe, reset)
            owner.disconnected.set()
            self.close_connection = True

    def _hang_up(self) -> None:
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, reply: Reply) -> None:
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


async def assert_refused(
    plugin: type[HttpModelPlugin], config: dict[str, Any], problem: str
) -> None:
    """Mounting ``plugin`` with ``config`` fails with a ``ConfigError`` naming the plugin
    and matching ``problem``, and registers no model."""
    async with Context() as root:
        await root.plugin(Llm)
        with pytest.raises(ConfigError, match=problem) as info:
            await root.plugin(plugin, config)
        assert root.llm.models() == []
    assert str(plugin.name) in str(info.value)


ServerT = TypeVar("ServerT", bound=LoopbackServer)


@contextmanager
def serve(cls: type[ServerT], monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerT]:
    """A ``cls`` server for one test (stopped at the end); proxies are bypassed."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    loopback = cls()
    try:
        yield loopback
    finally:
        loopback.close()


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def full_backlog() -> Iterator[str]:
    """A root URL whose listening socket never accepts: connecting times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        with suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
