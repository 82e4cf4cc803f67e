"""Helpers of the fleet tests (also used by the fleet-ray tests): a deployment on the
test model (``fleet_model.py``) with a store and the fleet, task files, and the FIFO
the model reports a blocked attempt's process through."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from dsh import Context, load_deployment
from dsh.testing import write_deployment
from dsh_fleet import Fleet
from dsh_session import Session
from tests.support import ECHO

HERE = Path(__file__).parent
#: The model the test model serves.
MODEL = "fleet-mock"
#: The session stores a fleet is tested on.
STORES = ("jsonl", "sqlite")
#: The usage the test model reports for an answer.
USAGE = {"input_tokens": 10, "output_tokens": 2}


def store_entry(directory: Path, store: str) -> str:
    """The deployment entry of ``store`` keeping its sessions under ``directory``."""
    if store == "jsonl":
        return f"- {{id: store, name: session-jsonl, config: {{root: '{directory / 'sessions'}'}}}}"
    return f"- {{id: store, name: session-sqlite, config: {{path: '{directory / 'sessions.db'}'}}}}"


def fleet_deployment(
    directory: Path, *, store: str = "jsonl", fleet: str = "{}", extra: str = ""
) -> Path:
    """A deployment in ``directory``: the test model (its control folder
    ``directory/control``, which holds a FIFO ``fifo``), agent-core on it, the echo
    tool, ``store`` and the fleet (config ``fleet``), then ``extra`` entries."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "fleet_model.py", directory / "fleet_model.py")
    shutil.copy(ECHO.parent / "echo_tool.py", directory / "echo_tool.py")
    control = directory / "control"
    control.mkdir(exist_ok=True)
    if not (control / "fifo").exists():
        os.mkfifo(control / "fifo")
    lines = [
        f"- {{id: model, name: ./fleet_model.py, config: {{control: '{control}'}}}}",
        f"- {{id: core, name: agent-core, config: {{model: {MODEL}}}}}",
        "- {id: echo, name: ./echo_tool.py}",
        store_entry(directory, store),
        f"- {{id: fleet, name: fleet, config: {fleet}}}",
        extra,
    ]
    return write_deployment(directory, "\n".join(lines) + "\n")


def write_tasks(path: Path, tasks: Sequence[Mapping[str, Any]]) -> Path:
    """``tasks`` as a JSON-lines file at ``path``."""
    path.write_text("".join(json.dumps(task) + "\n" for task in tasks), encoding="utf-8")
    return path


def answer_tasks(count: int, start: int = 1) -> list[dict[str, Any]]:
    """Tasks ``t<n>`` whose prompt is ``answer <n>``."""
    return [{"id": f"t{n}", "prompt": f"answer {n}"} for n in range(start, start + count)]


def block(control: Path, word: str) -> None:
    """Make the first attempt of the task ``block <word>`` block (see fleet_model)."""
    (control / f"block-{word}").touch()


@asynccontextmanager
async def loaded(path: Path) -> AsyncIterator[tuple[Context, Fleet]]:
    """The deployment at ``path`` loaded in a fresh root, and its fleet."""
    async with Context() as root:
        await load_deployment(path, root)
        yield root, root.fleet


def lines(text: str) -> list[dict[str, Any]]:
    """The JSON lines of ``text``."""
    return [json.loads(line) for line in text.splitlines()]


def types_of(session: Session) -> list[str]:
    """The event types of ``session``, in order."""
    return [event.type for event in session.events]


def ends(session: Session) -> list[str]:
    """The ``turn/end`` kinds of ``session``, in order."""
    return [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"]


async def blocked_pid(fifo: Path, stopped: anyio.Event) -> int | None:
    """The process id the test model writes to ``fifo`` when it blocks, or None when
    ``stopped`` is set first (nothing will write it)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    found: list[bytes] = []
    try:
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                while not found or not found[-1].endswith(b"\n"):
                    await anyio.wait_readable(fd)
                    chunk = os.read(fd, 64)
                    if not chunk:  # a writer closed it without a word
                        break
                    found.append(chunk)
                tg.cancel_scope.cancel()

            async def stop() -> None:
                await stopped.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(read)
            tg.start_soon(stop)
    finally:
        os.close(fd)
    text = b"".join(found).strip()
    return int(text) if text else None


async def snapshot(fleet: Fleet, session_id: str) -> Session:
    """The stored session ``session_id`` of ``fleet``'s store (which must hold it)."""
    stored: Session | None = await fleet.ctx.sessions.snapshot(session_id)
    assert stored is not None
    return stored
