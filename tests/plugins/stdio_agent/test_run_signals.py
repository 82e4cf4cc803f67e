"""``dsh run`` as a real process: SIGTERM mid-turn shuts down in order, SIGKILL while a
tool runs is repaired on resume, and a reader that goes away ends the output quietly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from dsh.testing import write_deployment
from tests.plugins.session_jsonl.jsonl_support import file_records
from tests.support import run_dsh_into_closed_pipe, stored_seqs

PLUGINS = '''\
import sys

import anyio
from pydantic import BaseModel

from dsh.testing import ScriptedModel, Wait, text, tool_call, tool_calls
from dsh_tools import Tool


def hold(ctx, config):
    """A model that writes a word, then holds its stream open."""
    model = ScriptedModel([*text("partial")[:2], Wait(anyio.Event())], models=["hold"])
    return model.install(ctx)


hold.inject = ["llm"]


def calls_block(ctx, config):
    """A model that calls the ``block`` tool."""
    return ScriptedModel(tool_calls(tool_call("block", id="c1")), models=["tool"]).install(ctx)


calls_block.inject = ["llm"]


class NoArgs(BaseModel):
    pass


async def block(args, call):
    print("BLOCKING", file=sys.stderr, flush=True)
    await anyio.Event().wait()


def block_tool(ctx, config):
    return ctx.tools.register(
        Tool(name="block", description="Blocks.", parameters=NoArgs, execute=block)
    )


block_tool.inject = ["tools"]
'''


def signal_deployment(directory: Path, model: str, plugin: str) -> Path:
    (directory / "signal_plugins.py").write_text(PLUGINS)
    return write_deployment(
        directory,
        f"""\
        - {{id: model, name: "./signal_plugins.py:{plugin}"}}
        - {{id: tool, name: "./signal_plugins.py:block_tool"}}
        - {{id: core, name: agent-core, config: {{model: {model}}}}}
        - {{id: store, name: session-jsonl, config: {{root: sessions}}}}
        """,
    )


def start_run(path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "dsh", "run", str(path), *args],
        cwd=path.parent,
        stdin=subprocess.DEVNULL,  # not the test runner's: -p would read a pipe as context
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def read_until(stream: IO[bytes] | None, marker: bytes) -> bytes:
    """Read ``stream`` until ``marker`` arrives (each read blocks on the process)."""
    assert stream is not None
    seen = b""
    while marker not in seen:
        byte = stream.read(1)
        assert byte, f"the stream ended before {marker!r}: {seen!r}"
        seen += byte
    return seen


def wait_exit(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    _, err = process.communicate(timeout=30)
    return process.returncode, err.decode()


def session_records(directory: Path) -> list[dict[str, Any]]:
    """The records of the one session stored under ``directory`` (after the header)."""
    (session,) = (directory / "sessions").iterdir()
    return file_records(session / "session.jsonl")[1:]


def test_sigterm_mid_turn_records_the_turn_end(tmp_path: Path) -> None:
    process = start_run(signal_deployment(tmp_path, "hold", "hold"), "-p", "hi")
    read_until(process.stdout, b"partial")
    process.send_signal(signal.SIGTERM)
    status, err = wait_exit(process)
    assert status == 128 + signal.SIGTERM, err
    assert "terminated: shutting down" in err
    assert "Traceback" not in err
    written = session_records(tmp_path)
    assert written[-1]["type"] == "turn/end"
    assert written[-1]["data"]["reason"] == {"kind": "aborted", "reason": "disposed"}
    seqs = stored_seqs(written)  # contiguous, a packed row of chunks counting each chunk
    assert seqs == list(range(len(seqs)))


def test_sigkill_while_a_tool_runs_is_repaired_on_resume(tmp_path: Path) -> None:
    path = signal_deployment(tmp_path, "tool", "calls_block")
    process = start_run(path, "-p", "block")
    read_until(process.stderr, b"BLOCKING")
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    before = session_records(tmp_path)
    assert [r["type"] for r in before][-1] == "tool/call"
    session = (tmp_path / "sessions").iterdir().__next__().name
    # Resume, and answer the next turn without the tool: the repaired turn stays.
    (tmp_path / "signal_plugins.py").write_text(
        PLUGINS.replace('tool_calls(tool_call("block", id="c1"))', '"resumed fine"')
    )
    done = subprocess.run(
        [sys.executable, "-m", "dsh", "run", str(path), "--resume", session, "-p", "go on"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "resumed fine\n"
    after = session_records(tmp_path)
    assert after[: len(before)] == before
    repaired = after[len(before) : len(before) + 3]
    assert [r["type"] for r in repaired] == ["tool/result", "step/end", "turn/end"]
    assert repaired[0]["data"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert repaired[2]["data"]["reason"] == {"kind": "interrupted"}


@pytest.mark.parametrize("command", [["plugins"], ["--help"]])
def test_a_reader_that_goes_away_ends_the_output_quietly(command: list[str]) -> None:
    # Unbuffered: each line is written at once, so the first write fails with EPIPE.
    done = run_dsh_into_closed_pipe(*command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr
    assert done.returncode in (0, 128 + signal.SIGPIPE)
