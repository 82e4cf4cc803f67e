"""A deployment whose turn blocks in a tool, and a ``dsh`` process started on it
with stdout and stderr pipes that nobody reads (their reading ends closed), driven
through two pipes of its own: the tool says ``BLOCKING`` when it runs and
``CANCELLED`` when the shutdown cancels it, then holds the shutdown until the test
releases it."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dsh.testing import write_deployment

#: How long a test waits for the process to say something or to exit.
TIMEOUT = 60.0

PLUGINS = '''\
import os

import anyio
from pydantic import BaseModel

from dsh.testing import ScriptedModel, tool_call, tool_calls
from dsh_tools import Tool


def _say(word):
    os.write(int(os.environ["DSH_TEST_SAY"]), word.encode() + b"\\n")


def calls_block(ctx, config):
    """A model that calls the ``block`` tool."""
    return ScriptedModel(tool_calls(tool_call("block", id="c1")), models=["block"]).install(ctx)


calls_block.inject = ["llm"]


class NoArgs(BaseModel):
    pass


async def block(args, call):
    try:
        _say("BLOCKING")
        await anyio.Event().wait()
    finally:
        _say("CANCELLED")
        with anyio.CancelScope(shield=True):
            await anyio.wait_readable(int(os.environ["DSH_TEST_RELEASE"]))


def block_tool(ctx, config):
    return ctx.tools.register(
        Tool(name="block", description="Blocks.", parameters=NoArgs, execute=block)
    )


block_tool.inject = ["tools"]
'''


def blocking_deployment(directory: Path, extra: str = "") -> Path:
    """agent-core on the model that calls ``block``, the tool, session-jsonl, and
    ``extra`` entries."""
    (directory / "term_plugins.py").write_text(PLUGINS)
    return write_deployment(
        directory,
        f"""\
        - {{id: model, name: "./term_plugins.py:calls_block"}}
        - {{id: tool, name: "./term_plugins.py:block_tool"}}
        - {{id: core, name: agent-core, config: {{model: block}}}}
        - {{id: store, name: session-jsonl, config: {{root: sessions}}}}
        {extra}""",
    )


@dataclass
class Unread:
    """A ``dsh`` process whose stdout and stderr have no reader."""

    process: subprocess.Popen[bytes]
    said: int
    release: int

    def expect(self, word: str) -> None:
        """Wait until the tool says ``word`` (fails after :data:`TIMEOUT`)."""
        seen = b""
        while not seen.endswith(word.encode() + b"\n"):
            ready, _, _ = select.select([self.said], [], [], TIMEOUT)
            assert ready, f"the process never said {word!r} (it said {seen!r})"
            chunk = os.read(self.said, 1)
            assert chunk, f"the process ended before it said {word!r} (it said {seen!r})"
            seen += chunk

    def let_go(self) -> None:
        """Let the cancelled tool return (the shutdown goes on)."""
        os.write(self.release, b"go\n")

    def wait(self) -> int:
        return self.process.wait(timeout=TIMEOUT)


@contextmanager
def unread_dsh(
    args: Sequence[str], cwd: Path, *, stdin: int = subprocess.DEVNULL, stdout: bool = False
) -> Iterator[Unread]:
    """``python -m dsh ARGS`` in ``cwd`` with stdout and stderr pipes whose reading
    ends are closed before it starts (with ``stdout``, the test reads stdout, from
    ``process.stdout``, until it closes it); killed on the way out if it still runs."""
    said_read, said_write = os.pipe()
    release_read, release_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    if not stdout:
        os.close(out_read)
    os.close(err_read)
    env = {**os.environ, "DSH_TEST_SAY": str(said_write), "DSH_TEST_RELEASE": str(release_read)}
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "dsh", *args],
            cwd=cwd,
            stdin=stdin,
            stdout=out_write,
            stderr=err_write,
            env=env,
            pass_fds=(said_write, release_read),
        )
    finally:
        for fd in (said_write, release_read, out_write, err_write):
            os.close(fd)
    if stdout:
        process.stdout = os.fdopen(out_read, "rb")
    try:
        yield Unread(process, said_read, release_write)
    finally:
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(said_read)
        os.close(release_write)


def tasks_file(path: Path) -> Path:
    """One fleet task whose turn calls ``block``."""
    path.write_text(json.dumps({"id": "t1", "prompt": "block"}) + "\n")
    return path
