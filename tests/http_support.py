"""The loopback HTTP server under every HTTP test: the model servers of the adapters
(``tests/plugins/llm_http_support.py``), the web site (``tests/plugins/web``), the OTLP
collector and the example's model.

:class:`Loopback` runs a stdlib ``ThreadingHTTPServer`` on 127.0.0.1, on a port the
kernel picks, in a daemon thread; :class:`QuietHandler` is the handler base (HTTP/1.1,
no access log, a client that goes away is no error). No test talks to another address.
"""

from __future__ import annotations

import gc
import ssl
import threading
from collections.abc import Iterator
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Loopback", "QuietHandler", "collect_garbage"]


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, nothing on stderr, and a client that resets the
    connection (between requests, or mid-answer) ends the exchange quietly."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """No access log."""

    def handle(self) -> None:
        with suppress(OSError):  # the client went away
            super().handle()


class Loopback:
    """``handler``'s server on 127.0.0.1 (over TLS with ``tls``), serving until
    :meth:`close`; :attr:`root` is its ``http(s)://127.0.0.1:<port>``."""

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None
    ) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = int(self.httpd.server_address[1])
        self.root = f"{'http' if tls is None else 'https'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)


def collect_garbage() -> Iterator[None]:
    """Collect cycles before a test ends, so any warning a collected object raises is
    reported against (and filtered by the marks of) the test that made it: the body of
    an autouse fixture (``yield from collect_garbage()``)."""
    yield
    gc.collect()
