"""Streaming benchmark: N content deltas from a loopback chat-completions server.

Run: ``.venv/bin/python -m bench.streaming`` (asyncio backend; ``--quick`` for a smoke
run). The server is a stdlib ``ThreadingHTTPServer`` in a separate process (so it does
not compete for the GIL) answering every POST with the same pre-built SSE body: N
OpenAI-style ``chat.completion.chunk`` frames of one content delta each, a finish
frame, a usage-only frame and ``[DONE]``, written in 64 KiB pieces of a chunked body.

Contenders, interleaved in each round, medians over the rounds:

* ``dsh loop path`` — ``Llm.stream`` (the ``llm-openai`` adapter behind the ``llm``
  service) feeding a ``BlockAssembler`` and recording every chunk in a session
  (``Session(SessionHeader("bench", 0.0))``, no persistence) with ``append_chunk``,
  packed per step, as the agent loop does.
* ``dsh adapter`` — ``OpenAIAdapter.stream`` alone, concatenating text deltas.
* ``openai SDK`` — ``AsyncOpenAI(max_retries=0).chat.completions.create(stream=True)``,
  concatenating ``delta.content``.
* ``raw httpx floor`` — ``client.stream`` + ``aiter_lines`` + ``json.loads`` per data
  line, concatenating content.

Every contender's assembled text is checked against the expected length, so the
workload cannot shrink.
"""

from __future__ import annotations

import json
import multiprocessing
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from multiprocessing.connection import Connection
from typing import Any

import anyio
import httpx
import openai

import dsh
from dsh_llm import BlockAssembler, Llm, LlmRequest, Message, TextDelta
from dsh_llm_openai import OpenAIAdapter, OpenAICompatible, OpenAICompatibleConfig
from dsh_session import Session, SessionHeader

MODEL = "bench-model"
FLOOR = "raw httpx floor"
PIECE = 65536


def _words(count: int) -> list[str]:
    return [f"w{i % 997} " for i in range(count)]


def _body(count: int) -> bytes:
    """The SSE body: one frame per delta, then finish, usage and [DONE]."""

    def frame(delta: dict[str, Any], finish: str | None = None) -> str:
        chunk = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": MODEL,
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            "usage": None,
        }
        return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"

    parts = [frame({"role": "assistant", "content": ""})]
    parts.extend(frame({"content": word}) for word in _words(count))
    parts.append(frame({}, "stop"))
    usage = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": count, "total_tokens": count + 10},
    }
    parts.append(f"data: {json.dumps(usage, separators=(',', ':'))}\n\n")
    parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


async def _measure(
    fns: dict[str, Callable[[], Awaitable[None]]], rounds: int
) -> dict[str, list[float]]:
    """Seconds per call of each fn, the fns interleaved in every round."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            await fn()
            samples[name].append(time.perf_counter() - start)
    return samples


def _serve(count: int, pipe: Connection) -> None:
    body = _body(count)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for start in range(0, len(body), PIECE):
                    piece = body[start : start + PIECE]
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.close_connection = True

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    pipe.send((httpd.server_address[1], len(body)))
    httpd.serve_forever()


def _contenders(
    llm: Llm, adapter: OpenAIAdapter, sdk: openai.AsyncOpenAI, client: httpx.AsyncClient, count: int
) -> dict[str, Callable[[], Awaitable[None]]]:
    expected = sum(len(word) for word in _words(count))
    request = LlmRequest(model=MODEL, messages=(Message.user("stream"),))
    url = f"{adapter.config.base_url}/chat/completions"
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "stream"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    async def dsh_loop_path() -> None:
        session = Session(SessionHeader("bench", 0.0))
        assembler = BlockAssembler()
        async with aclosing(llm.stream(request)) as chunks:
            async for chunk in chunks:
                session.append_chunk(1, 1, chunk)
                assembler.push(chunk)
        result = assembler.result()
        assert result.finish.reason == "stop", result.finish
        assert len(result.message.text) == expected
        assert len(session.events) == count + 4  # start, deltas, end, usage, finish

    async def dsh_adapter() -> None:
        async with aclosing(adapter.stream(request)) as chunks:
            parts = [chunk.text async for chunk in chunks if isinstance(chunk, TextDelta)]
        assert len("".join(parts)) == expected

    async def openai_sdk() -> None:
        stream = await sdk.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "stream"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        parts = [
            chunk.choices[0].delta.content or ""
            async for chunk in stream
            if chunk.choices and chunk.choices[0].delta.content
        ]
        assert len("".join(parts)) == expected

    async def raw_httpx() -> None:
        parts: list[str] = []
        async with client.stream("POST", url, json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    break
                choices = json.loads(data)["choices"]
                if choices:
                    content = choices[0]["delta"].get("content")
                    if content:
                        parts.append(content)
        assert len("".join(parts)) == expected

    return {
        FLOOR: raw_httpx,
        "dsh adapter": dsh_adapter,
        "dsh loop path": dsh_loop_path,
        "openai SDK": openai_sdk,
    }


async def run(count: int, rounds: int, base_url: str) -> dict[str, list[float]]:
    """Seconds per full stream of each contender, per round."""
    config = OpenAICompatibleConfig(api_key="sk-bench", base_url=base_url, models=[MODEL])
    async with dsh.Context() as root, httpx.AsyncClient(timeout=60) as client:
        await root.plugin(Llm)
        await root.plugin(OpenAICompatible, config.model_dump())
        sdk = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
        fns = _contenders(root.llm, OpenAIAdapter(config, client), sdk, client, count)
        for fn in fns.values():  # warm-up: connections, imports, caches
            await fn()
        samples = await _measure(fns, rounds)
        await sdk.close()
    return samples


def main() -> None:
    quick = "--quick" in sys.argv
    count = 10_000 if quick else 100_000
    rounds = 3 if quick else 7
    print(
        f"dsh streaming benchmark (python {platform.python_version()}, httpx {httpx.__version__},"
        f" openai {openai.__version__} on httpx2 {version('httpx2')}, anyio {version('anyio')},"
        " asyncio backend)"
    )
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(count, child), daemon=True
    )
    server.start()
    try:
        port, size = parent.recv()
        print(
            f"body: {count} deltas, {size / 1e6:.1f} MB per response; {rounds} rounds, interleaved"
        )
        samples = anyio.run(run, count, rounds, f"http://127.0.0.1:{port}/v1")
    finally:
        server.terminate()
        server.join()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    floor = medians[FLOOR]
    sdk = medians["openai SDK"]
    print(f"\nstream {count} content deltas (median of {rounds}):")
    print(f"{'':<16}{'ms/stream':>11}{'us/delta':>10}{'deltas/s':>12}{'vs floor':>10}{'vs SDK':>8}")
    for name, seconds in medians.items():
        print(
            f"{name:<16}{seconds * 1e3:>11.1f}{seconds / count * 1e6:>10.2f}"
            f"{count / seconds:>12,.0f}{seconds / floor:>9.2f}x{seconds / sdk:>7.2f}x"
        )


if __name__ == "__main__":
    main()
