"""The stdio transport itself: framing errors, and a server that ignores both stdin's
end and SIGTERM (RFC 0024: dsh starts the server under its lifeline)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio
import pytest
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from dsh.lifeline import LIFELINE
from dsh.testing import capture_logs
from dsh_mcp import _stdio
from dsh_mcp._stderr import StderrLog, log_path
from tests.core.lifeline_support import await_line, ready_pipe
from tests.plugins.bash.bash_support import dies

pytestmark = pytest.mark.anyio


NOTICE = '{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}'


def errors() -> StderrLog:
    return StderrLog("test", logging.getLogger("dsh.test"))


async def test_a_later_line_that_is_not_a_message_arrives_as_an_error(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}; echo '{NOTICE}'; echo not-json; cat > /dev/null"
    command = ("sh", ["-c", script], dict(os.environ), tmp_path, errors())
    async with _stdio.stdio(*command) as (read, _):
        with anyio.fail_after(30):
            first = await read.receive()
            received = await read.receive()
        pid = int(pid_file.read_text())
        assert pid in LIFELINE.groups
    assert isinstance(first, SessionMessage)
    assert isinstance(received, ValidationError)
    assert pid not in LIFELINE.groups
    await dies(pid)


async def test_a_server_deaf_to_stdin_and_sigterm_is_killed_with_its_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_stdio, "GRACE", 0.05)
    ready = ready_pipe(tmp_path)
    script = f"trap '' TERM; sleep 1000 & echo \"$$ $!\" > {ready}; while :; do sleep 1; done"
    async with _stdio.stdio("sh", ["-c", script], dict(os.environ), None, errors()):
        said = await anyio.to_thread.run_sync(await_line, ready)
    server, child = (int(pid) for pid in said.split())
    await dies(server)
    await dies(child)


async def test_a_first_request_a_server_may_send_is_a_message(tmp_path: Path) -> None:
    ping = '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    command = ("sh", ["-c", f"echo '{ping}'; cat > /dev/null"], dict(os.environ), None, errors())
    async with _stdio.stdio(*command) as (read, _):
        with anyio.fail_after(30):
            first = await read.receive()
    assert isinstance(first, SessionMessage)


async def test_the_stderr_log_is_named_by_the_server_and_survives_an_unwritable_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert log_path("my/odd server") == tmp_path / "state" / "dsh" / "mcp" / "my_odd_server.log"
    assert log_path("..") == tmp_path / "state" / "dsh" / "mcp" / "_.log"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert log_path("x") == tmp_path / "home" / ".local" / "state" / "dsh" / "mcp" / "x.log"
    (tmp_path / "taken").write_text("a file, not a folder")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "taken"))
    with capture_logs("dsh.test", logging.DEBUG) as records:
        log = errors()
        await log.write(b"one\ntw")
        await log.write(b"o\n")
        await log.aclose()
    assert records.messages() == [
        f'MCP server "test": cannot write its stderr to {tmp_path}/taken/dsh/mcp/test.log: '
        "Not a directory (it is dropped)",
        'MCP server "test": one',
        'MCP server "test": two',
    ]


async def test_what_a_server_writes_to_stderr_as_it_exits_reaches_its_log(
    state_home: Path,
) -> None:
    script = "echo starting >&2; read line; echo last words >&2"
    async with _stdio.stdio("sh", ["-c", script], dict(os.environ), None, errors()) as (_, w):
        del w  # nothing is sent: stdin is closed on the way out, and the script ends
    log = state_home / "dsh" / "mcp" / "test.log"
    assert log.read_text(encoding="utf-8") == "starting\nlast words\n"
