"""SIGTERM stops every deployment command even when nobody reads its stdout or stderr:
a real ``dsh`` process per command, its turn blocked in a tool, its output pipes
closed by the test; the shutdown cancels the tool and the process exits 143. A second
SIGTERM, or a SIGINT, while the shutdown runs does not interrupt it (docs/rfc/0027)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

import dsh
from dsh._stderr import _Tolerant, flush_stdout, print_stderr, tolerant_stderr
from tests.core.sigterm_support import (
    Unread,
    blocking_deployment,
    tasks_file,
    unread_dsh,
)
from tests.plugins.session_jsonl.jsonl_support import file_records
from tests.support import HELLO

TERMINATED = 128 + signal.SIGTERM
#: What arrives while the shutdown runs: nothing, a second SIGTERM, a SIGINT.
LATER = [None, signal.SIGTERM, signal.SIGINT]


def shut_down(run: Unread, later: signal.Signals | None) -> int:
    """SIGTERM once the tool blocks; ``later`` while the shutdown holds on the
    cancelled tool; the exit status."""
    run.process.send_signal(signal.SIGTERM)
    run.expect("CANCELLED")
    if later is not None:
        run.process.send_signal(later)
    run.let_go()
    return run.wait()


def last_record(directory: Path) -> dict[str, object]:
    (session,) = (directory / "sessions").iterdir()
    record: dict[str, object] = file_records(session / "session.jsonl")[-1]
    return record


@pytest.mark.parametrize("later", LATER)
def test_run_p(tmp_path: Path, later: signal.Signals | None) -> None:
    path = blocking_deployment(tmp_path)
    with unread_dsh(["run", str(path), "-p", "block"], tmp_path) as run:
        run.expect("BLOCKING")
        assert shut_down(run, later) == TERMINATED
    assert last_record(tmp_path)["type"] == "turn/end"


@pytest.mark.parametrize("later", LATER)
def test_fleet_run(tmp_path: Path, later: signal.Signals | None) -> None:
    path = blocking_deployment(tmp_path, "- {id: fleet, name: fleet}")
    args = ["fleet", "run", str(path), str(tasks_file(tmp_path / "tasks.jsonl"))]
    with unread_dsh(args, tmp_path) as run:
        run.expect("BLOCKING")
        assert shut_down(run, later) == TERMINATED
    assert last_record(tmp_path)["type"] == "turn/end"


def send(run: Unread, message: dict[str, object]) -> None:
    stdin = run.process.stdin
    assert stdin is not None
    stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
    stdin.flush()


def answer(run: Unread, request: int) -> dict[str, object]:
    """The protocol's answer to ``request`` (what comes before it is skipped)."""
    stdout = run.process.stdout
    assert stdout is not None
    while True:
        line = stdout.readline()
        assert line, f"stdout ended before the answer to request {request}"
        message: dict[str, object] = json.loads(line)
        if message.get("id") == request:
            return message


@pytest.mark.parametrize("later", LATER)
def test_acp(tmp_path: Path, later: signal.Signals | None) -> None:
    """The protocol needs stdout until the prompt runs; then the test stops reading it."""
    path = blocking_deployment(tmp_path)
    with unread_dsh(["acp", str(path)], tmp_path, stdin=subprocess.PIPE, stdout=True) as run:
        send(run, {"id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
        answer(run, 0)
        send(
            run,
            {"id": 1, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}},
        )
        result = answer(run, 1)["result"]
        assert isinstance(result, dict)
        prompt = [{"type": "text", "text": "block"}]
        params = {"sessionId": result["sessionId"], "prompt": prompt}
        send(run, {"id": 2, "method": "session/prompt", "params": params})
        run.expect("BLOCKING")
        assert run.process.stdout is not None
        run.process.stdout.close()
        assert shut_down(run, later) == TERMINATED
    assert last_record(tmp_path)["type"] == "turn/end"


# -- in process --------------------------------------------------------------------------


def test_a_broken_pipe_while_the_shutdown_runs_keeps_the_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def body(root: dsh.Context, deployment: dsh.Fiber) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        try:
            await anyio.sleep_forever()
        finally:
            raise BaseExceptionGroup("writes", [BrokenPipeError(), BrokenPipeError()])

    assert dsh.run_deployment_command(HELLO, body) == TERMINATED
    assert capsys.readouterr().err == "terminated: shutting down\n"


def test_other_errors_while_the_shutdown_runs_are_raised() -> None:
    async def body(root: dsh.Context, deployment: dsh.Fiber) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        try:
            await anyio.sleep_forever()
        finally:
            raise BaseExceptionGroup("writes", [BrokenPipeError(), KeyError("x")])

    with pytest.raises(BaseExceptionGroup) as raised:
        dsh.run_deployment_command(HELLO, body)
    assert raised.group_contains(KeyError)


def test_a_broken_pipe_without_sigterm_is_raised_as_it_is() -> None:
    async def body(root: dsh.Context, deployment: dsh.Fiber) -> int:
        raise BrokenPipeError("stdout")

    with pytest.raises(BrokenPipeError, match="stdout"):
        dsh.run_deployment_command(HELLO, body)


class Broken(io.StringIO):
    """A stream whose reader went away."""

    def write(self, text: str) -> int:
        raise BrokenPipeError

    def flush(self) -> None:
        raise BrokenPipeError


def test_reports_to_a_broken_stream_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", Broken())
    monkeypatch.setattr(sys, "stdout", Broken())
    print_stderr("lost")  # no fd to point elsewhere: nothing happens
    flush_stdout()


def test_a_broken_pipe_is_pointed_at_the_null_device() -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        raw = _Tolerant(write)
        assert (raw.writable(), raw.fileno(), raw.isatty()) == (True, write, False)
        assert raw.write(b"gone") == 4  # counted as written, and dropped
        assert os.path.samestat(os.fstat(write), os.stat(os.devnull))
        assert raw.write(b"more") == 4
    finally:
        os.close(write)


def test_a_full_non_blocking_pipe_is_waited_on() -> None:
    read, write = os.pipe()
    os.set_blocking(write, False)
    data = b"x" * (1 << 20)  # more than a pipe holds
    got: list[bytes] = []

    def drain() -> None:
        while sum(map(len, got)) < len(data):
            got.append(os.read(read, 1 << 16))

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        assert _Tolerant(write).write(data) == len(data)
        reader.join(30)
        assert b"".join(got) == data
    finally:
        os.close(read)
        os.close(write)


def test_a_captured_stderr_is_left_alone(capsys: pytest.CaptureFixture[str]) -> None:
    before = sys.stderr
    with tolerant_stderr():
        assert sys.stderr is before
