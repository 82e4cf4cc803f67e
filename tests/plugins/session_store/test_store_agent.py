"""Each store under a real agent: a persisted turn resumed from a deployment, and a
process SIGKILLed mid-turn whose committed records all survive."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

import dsh
from dsh.testing import write_deployment
from dsh_agent_loop import USAGE_EVENT
from dsh_llm import ToolResultBlock
from dsh_session import Sessions
from tests.plugins.session_store.store_support import Store, json_records
from tests.support import echo_deployment

pytestmark = pytest.mark.anyio


async def test_an_agent_turn_is_persisted_and_resumed(store: Store, tmp_path: Path) -> None:
    yml = echo_deployment(tmp_path, "{model: echo-mock}", store.yaml_entry())
    async with dsh.Context() as ctx:
        await dsh.load_deployment(yml, ctx)
        agent = ctx.agents.get("main")
        agent.send("echo hello")
        await agent.when_idle()
        session = agent.session
        messages = session.derive_messages()
        events = json_records(session)
    assert messages[-1].text == "The echo tool returned: hello"
    assert store.header(session.id)["meta"] == {"agent": "main", "model": "echo-mock"}
    # Read back, the stored records are the events; session-jsonl packs each step's
    # chunks into one row (two steps: two rows), session-sqlite keeps a row per chunk.
    assert store.records(session.id) == events
    packed = [r["type"] for r in store.rows(session.id)].count("assistant/chunks")
    assert packed == (2 if store.packs else 0)

    async with dsh.Context() as ctx:
        await dsh.load_deployment(yml, ctx)
        resumed = await ctx.sessions.resume(session.id)
        assert resumed.derive_messages() == messages
        # Continue the conversation with the resumed log (what `--resume` does).
        again = ctx.agents.create("again", model="echo-mock", session=resumed)
        again.send("echo more")
        await again.when_idle()
        assert resumed.turn_end(2) == {"kind": "completed"}
        history = [m.text for m in resumed.derive_messages() if m.role == "assistant"]
        assert history[-1] == "The echo tool returned: more"
    # The declared agent of the second run got a new session, but wrote nothing.
    (summary,) = store.summaries()
    assert (summary.id, summary.turns, summary.open) == (session.id, 2, False)
    assert summary.meta == {"agent": "main", "model": "echo-mock"}


# -- SIGKILL mid-turn --------------------------------------------------------------------

SCRIPTED_MODEL = '''\
"""A slow scripted model: step 1 calls the ``probe`` tool; step 2 streams some text,
says BLOCKED and waits for a line on stdin (the test never sends one)."""

import sys

import anyio
from pydantic import BaseModel

from dsh_llm import BlockEnd, BlockStart, Finish, TextDelta, ToolCallDelta
from dsh_tools import Tool

name = "slow-model"
inject = ["llm", "tools"]


class NoArgs(BaseModel):
    pass


class Slow:
    async def stream(self, request):
        if request.step == 1:
            yield BlockStart(0, "tool-call")
            yield ToolCallDelta(0, "call-1", "{}", name="probe")
            yield BlockEnd(0)
            yield Finish("tool-calls")
            return
        yield BlockStart(0, "text")
        yield TextDelta(0, "thinking")
        print("BLOCKED", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        yield TextDelta(0, " done")
        yield BlockEnd(0)
        yield Finish("stop")


async def probe(args, call):
    return "probed"


def apply(ctx, config):
    yield ctx.llm.register_adapter(["slow"], Slow())
    yield ctx.tools.register(
        Tool(name="probe", description="Probe.", parameters=NoArgs, execute=probe)
    )
'''

DRIVER = """\
import sys

import anyio

import dsh
from dsh_session import COMMIT_EVENTS


async def main(path):
    async with dsh.Context() as root:
        await dsh.load_deployment(path, root)
        agent = root.agents.get("main")

        def report(session, event):
            # Registered after the backend's listener: it runs once the record is durable.
            if event.type in COMMIT_EVENTS or event.type == "step/end":
                print("COMMIT", event.seq, event.type, flush=True)
            if event.type == "tool/result":
                print("READY", flush=True)

        root.on("session/event", report)
        print("SESSION", agent.session.id, flush=True)
        agent.send("probe, please")
        await agent.when_idle()  # never: the model waits on stdin


anyio.run(main, sys.argv[1])
"""


@dataclass
class Crash:
    store: Store
    session_id: str
    committed: list[tuple[int, str]]


def _pump(stream: object, lines: queue.Queue[str | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line.rstrip("\n"))
    lines.put(None)


@pytest.fixture
def crash(store: Store, tmp_path: Path) -> Crash:
    """Run a deployment in a child process and SIGKILL it mid-turn."""
    (tmp_path / "scripted.py").write_text(SCRIPTED_MODEL)
    (tmp_path / "driver.py").write_text(DRIVER)
    yml = write_deployment(
        tmp_path,
        f"""\
        - id: model
          name: ./scripted.py
        - id: agent-core
          name: agent-core
          config: {{model: slow}}
        {store.yaml_entry()}
        """,
        "slow.yml",
    )
    command = [sys.executable, str(tmp_path / "driver.py"), str(yml)]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(command, cwd=tmp_path, text=True, **pipes) as child:  # type: ignore[call-overload]
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(child.stdout, lines), daemon=True).start()
        session_id = ""
        committed: list[tuple[int, str]] = []
        ready = False
        try:
            while True:
                line = lines.get(timeout=120)  # a guard against a hung child, not a wait
                if line is None:
                    pytest.fail(f"the driver exited early:\n{child.stderr.read()}")
                kind, _, rest = line.partition(" ")
                if kind == "SESSION":
                    session_id = rest
                elif kind == "COMMIT":
                    seq, event_type = rest.split(" ")
                    committed.append((int(seq), event_type))
                elif kind == "READY":
                    ready = True
                elif kind == "BLOCKED":
                    break
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
        assert child.wait() == -signal.SIGKILL
    assert ready
    return Crash(store, session_id, committed)


async def test_records_committed_before_a_sigkill_survive_and_the_turn_is_closed(
    crash: Crash,
) -> None:
    # Killed while the model streams step 2: step 1 was committed, step 2 was not.
    assert crash.committed == [
        (1, "user/message"),
        (8, "assistant/message"),
        (10, "tool/call"),  # after the step's usage/step (buffered, written with it)
        (11, "tool/result"),
        (12, "step/end"),
    ]
    async with dsh.Context() as ctx:
        await ctx.plugin(Sessions)
        ctx.sessions.declare_event_types(USAGE_EVENT)  # as the agent loop does
        await crash.store.start(ctx)
        session = await ctx.sessions.resume(crash.session_id)
        for seq, event_type in crash.committed:
            assert session.events[seq].type == event_type
        types = [e.type for e in session.events]
        # What was buffered before a commit was written with it.
        assert types[: types.index("assistant/message")] == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/chunk",
            "assistant/chunk",
            "assistant/chunk",
            "assistant/chunk",
        ]
        # Step 2's start, header and chunks were only buffered: lost with the process.
        assert types[9] == "usage/step"
        assert types[12:] == ["step/end", "turn/end"]
        assert session.events[-1].data == {"turn": 1, "reason": {"kind": "interrupted"}}
        assert [m.role for m in session.derive_messages()] == ["user", "assistant", "tool"]
        result = session.derive_messages()[-1].content[0]
        assert isinstance(result, ToolResultBlock)
        assert result.content == "probed"
