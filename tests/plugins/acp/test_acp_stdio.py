"""``dsh acp`` on stdio that is not a pipe (docs/rfc/0028): the null device and regular
files work, the end of input ends the process, a line that is not JSON-RPC is answered
with an error frame; and the transport's own branches, in process.

Real processes (the first three) are slow; the package is asyncio-only, so the
in-process tests run on asyncio.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_acp._stdio import CLIENT_GONE, StdioTransport
from tests.plugins.acp.acp_support import process_deployment

#: What the test deployment's marker plugin prints (to stdout, which is stderr here).
NOISE = b"NOISE on stdout\n"
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}


def dsh_acp(tmp_path: Path, *flags: str, **streams: Any) -> subprocess.CompletedProcess[bytes]:
    """``python -m dsh [flags] acp dsh.yml`` in ``tmp_path`` (the test deployment)."""
    process_deployment(tmp_path)
    # The timeout only stops a hung process; the assertions are on what it wrote.
    return subprocess.run(
        [sys.executable, "-m", "dsh", *flags, "acp", str(tmp_path / "dsh.yml")],
        cwd=tmp_path,
        timeout=110,
        check=False,
        **streams,
    )


def frames(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def test_stdin_at_the_null_device_ends_at_once_and_exits_0(tmp_path: Path) -> None:
    run = dsh_acp(tmp_path, stdin=subprocess.DEVNULL, capture_output=True)
    assert (run.returncode, run.stdout, run.stderr) == (0, b"", NOISE)


@pytest.mark.parametrize(("fd", "name"), [(0, "stdin"), (1, "stdout")])
def test_a_closed_stdin_or_stdout_is_refused_in_one_line(
    tmp_path: Path, fd: int, name: str
) -> None:
    run = dsh_acp(
        tmp_path,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=functools.partial(os.close, fd),
    )
    assert (run.returncode, run.stderr.decode()) == (
        1,
        f"dsh acp: {name} is closed; the protocol runs on stdin and stdout (an editor "
        "connects them to pipes; a file or /dev/null works too)\n",
    )


def test_a_script_in_a_file_is_answered_into_a_regular_file(tmp_path: Path) -> None:
    script = tmp_path / "in.jsonl"
    new = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/new",
        "params": {"cwd": str(tmp_path), "mcpServers": []},
    }
    script.write_text(f"{json.dumps(INITIALIZE)}\n\n{json.dumps(new)}\n")
    out = tmp_path / "out.jsonl"
    with script.open("rb") as stdin, out.open("wb") as stdout:
        run = dsh_acp(tmp_path, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
    assert (run.returncode, run.stderr) == (0, NOISE)
    # The end of a script is not the client leaving: both requests were answered.
    sent = frames(out.read_bytes())
    answers = {frame["id"]: frame for frame in sent if "id" in frame}
    assert answers[0]["result"]["protocolVersion"] == 1
    session = answers[1]["result"]["sessionId"]
    # The session's command list follows the answer that names the session.
    (listing,) = [frame for frame in sent if "id" not in frame]
    assert sent.index(listing) > sent.index(answers[1])
    assert listing["method"] == "session/update"
    assert listing["params"]["sessionId"] == session
    assert listing["params"]["update"]["sessionUpdate"] == "available_commands_update"


@pytest.mark.parametrize(
    ("flags", "logged"),
    [
        ((), NOISE),
        (
            ("-v",),
            NOISE + b"INFO dsh.acp: line 1 of the client's input is not JSON: answered -32700\n"
            b"INFO dsh.acp: line 2 of the client's input is not a JSON object: answered -32600\n"
            b"INFO dsh.acp: line 3 of the client's input has no method and no id: answered "
            b"-32600\n",
        ),
    ],
)
def test_a_line_that_is_not_a_message_is_answered_with_an_error_frame(
    tmp_path: Path, flags: tuple[str, ...], logged: bytes
) -> None:
    run = dsh_acp(
        tmp_path, *flags, input=b'garbage\n[1]\n{"jsonrpc": "2.0"}\n', capture_output=True
    )
    assert (run.returncode, run.stderr) == (0, logged)
    parse, invalid, empty = frames(run.stdout)
    assert (parse["id"], parse["error"]["code"], parse["error"]["data"]["line"]) == (
        None,
        -32700,
        1,
    )
    assert (invalid["error"]["code"], invalid["error"]["data"]["line"]) == (-32600, 2)
    assert (empty["error"]["code"], empty["error"]["data"]["line"]) == (-32600, 3)


# -- the transport in process ----------------------------------------------------------


@pytest.fixture
def descriptors() -> Iterator[list[int]]:
    """File descriptors the test opens, closed after it (the transport leaves them)."""
    opened: list[int] = []
    yield opened
    for fd in opened:
        os.close(fd)


def transport_on(
    tmp_path: Path, descriptors: list[int], lines: list[dict[str, Any]]
) -> tuple[StdioTransport, Path]:
    """A transport reading ``lines`` from a regular file and writing to another."""
    script = tmp_path / "in.jsonl"
    script.write_text("".join(f"{json.dumps(line)}\n" for line in lines))
    out = tmp_path / "out.jsonl"
    fd_in, fd_out = os.open(script, os.O_RDONLY), os.open(out, os.O_WRONLY | os.O_CREAT)
    descriptors += [fd_in, fd_out]
    return StdioTransport(fd_in, fd_out, logging.getLogger("dsh.test")), out


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_at_a_scripts_end_requests_to_the_client_are_answered_by_the_transport(
    tmp_path: Path, descriptors: list[int]
) -> None:
    asked = {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission"}
    transport, out = transport_on(tmp_path, descriptors, [INITIALIZE])
    assert await transport.receive() == INITIALIZE
    await transport.send(asked)
    # Its end reached, the script's request is still unanswered: ours is refused, and
    # the end comes once the script's request is answered.
    reply = await transport.receive()
    assert reply is not None
    assert (reply["id"], reply["error"]["data"]["details"]) == (7, CLIENT_GONE)
    await transport.send({**asked, "id": 8})
    reply = await transport.receive()
    assert reply is not None
    assert reply["id"] == 8
    await transport.send({"jsonrpc": "2.0", "id": 0, "result": {}})
    assert await transport.receive() is None
    await transport.close()
    assert [frame["id"] for frame in frames(out.read_bytes())] == [7, 8, 0]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_answered_request_to_the_client_is_not_refused(
    tmp_path: Path, descriptors: list[int]
) -> None:
    transport, _ = transport_on(tmp_path, descriptors, [{"jsonrpc": "2.0", "id": 3, "result": {}}])
    await transport.send({"jsonrpc": "2.0", "id": 3, "method": "session/request_permission"})
    assert await transport.receive() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert await transport.receive() is None
    await transport.close()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_frames_to_a_closed_output_are_dropped_with_one_warning(
    descriptors: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    fd_in = os.open(os.devnull, os.O_RDONLY)
    descriptors += [fd_in, write_end]
    transport = StdioTransport(fd_in, write_end, logging.getLogger("dsh.test"))
    with caplog.at_level(logging.WARNING, "dsh.test"):
        await transport.send(INITIALIZE)
        await transport.send(INITIALIZE)
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "the client's output is closed"
    ]
    # The null device is no script: its end is the client leaving.
    assert await transport.receive() is None
    await transport.close()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_cancelled_receive_leaves_the_transport_usable(descriptors: list[int]) -> None:
    read_end, write_end = os.pipe()
    out = os.open(os.devnull, os.O_WRONLY)
    descriptors += [read_end, out]
    transport = StdioTransport(read_end, out, logging.getLogger("dsh.test"))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await transport.receive()
    # The cancelled read takes the next line (and nobody hears it); the one after
    # is the end of the pipe.
    os.write(write_end, b'{"jsonrpc": "2.0", "method": "lost"}\n')
    os.close(write_end)
    assert await transport.receive() is None
    await transport.close()
