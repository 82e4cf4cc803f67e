"""Helpers of this project's own tests (what plugin authors need is in ``dsh.testing``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from dsh import Context, DeploymentError, load_deployment
from dsh.testing import Mark, ScriptedModel, Wait, write_deployment
from dsh_agent_loop import LoopAgent
from dsh_session import Session

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples"
#: A system prompt alone: no agents, no model.
HELLO = EXAMPLES / "hello" / "dsh.yml"
#: The keyless echo agent: a scripted model and an ``echo`` tool.
ECHO = EXAMPLES / "echo-agent" / "dsh.yml"
#: The harness identity, the first section of every system prompt.
IDENT = "You are an AI agent powered by dsh."
#: The events of a step the model answered without calling a tool.
ANSWERED_STEP = ("step/start", "assistant/message", "usage/step", "step/end")
#: An agent-core config declaring two agents on the echo model.
TWO_AGENTS = "{model: echo-mock, persona: 'On {{model}}.', agents: [{id: a}, {id: b}]}"


async def failed_deployment(
    directory: Path, entries: str, *, absent: str | None = None
) -> tuple[Path, DeploymentError]:
    """Write the deployment ``entries`` (YAML, dedented) in ``directory`` and load it
    into a fresh root, which must fail; the file and the error. With ``absent``: the
    failed load left no such service on the root."""
    path = write_deployment(directory, entries)
    async with Context() as root:
        with pytest.raises(DeploymentError) as caught:
            await load_deployment(path, root)
        if absent is not None:
            assert root.get(absent) is None
    return path, caught.value


def echo_deployment(directory: Path, core: str, extra: str = "") -> Path:
    """The echo example's model and tool with another agent-core config (and
    ``extra`` entries), written to ``directory``."""
    for name in ("mock_model.py", "echo_tool.py"):
        shutil.copy(ECHO.parent / name, directory / name)
    return write_deployment(
        directory,
        f"""\
        - {{id: model, name: ./mock_model.py}}
        - {{id: agent-core, name: agent-core, config: {core}}}
        - {{id: echo, name: ./echo_tool.py}}
        {extra}""",
    )


#: A ``dsh-session-jsonl`` store entry keeping sessions under ``stored`` (relative).
JSONL_STORE = "- {id: store, name: session-jsonl, config: {root: stored}}\n"


def stored_echo_deployment(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: str = "echo-mock",
    store: str = JSONL_STORE,
) -> Path:
    """The echo deployment on ``model`` with the ``store`` entry, written to
    ``tmp_path``, which becomes the current directory (where relative stores keep their
    sessions)."""
    monkeypatch.chdir(tmp_path)
    return echo_deployment(tmp_path, f"{{model: {model}}}", store)


def first_stored_session(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``dsh sessions PATH`` lists nothing, ``dsh run PATH -p 'echo one'`` succeeds;
    the line ``dsh sessions PATH`` then lists for that one session."""
    from dsh import cli

    assert cli.main(["sessions", str(path)]) == 0
    assert capsys.readouterr().out == "no stored sessions\n"
    assert cli.main(["run", str(path), "-p", "echo one"]) == 0
    capsys.readouterr()
    assert cli.main(["sessions", str(path)]) == 0
    line: str = capsys.readouterr().out
    return line


def _dsh(args: Sequence[str], **options: Any) -> subprocess.CompletedProcess[str]:
    """``python -m dsh ARGS`` in a subprocess with text streams, its status unchecked."""
    return subprocess.run([sys.executable, "-m", "dsh", *args], text=True, check=False, **options)


def run_dsh(
    *args: str,
    stdin: str = "",
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python -m dsh ARGS`` as a user runs it, in a subprocess fed ``stdin``; the
    ``timeout`` fails a test instead of hanging it."""
    return _dsh(args, input=stdin, cwd=cwd, env=env, capture_output=True, timeout=timeout)


def run_dsh_into_closed_pipe(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    """``python -m dsh ARGS | head -1`` once ``head`` has gone: stdout is a pipe whose
    reading end is closed, so the first write fails with EPIPE; stderr is captured."""
    read, write = os.pipe()
    os.close(read)
    try:
        return _dsh(
            args, cwd=cwd, env=env, stdin=stdin, stdout=write, stderr=subprocess.PIPE, timeout=120
        )
    finally:
        os.close(write)


@dataclass
class AgentRig:
    """A root with an agent on a scripted model: what a test's rig is built on."""

    root: Context
    model: ScriptedModel
    agent: LoopAgent

    def result(self, n: int = 0) -> dict[str, Any]:
        """The data of the agent's ``n``-th ``tool/result`` event."""
        return dict(event_data(self.agent.session, "tool/result")[n])

    def sent(self, n: int) -> list[str]:
        """The texts of the user messages of the model's ``n``-th request."""
        return [
            block.text
            for message in self.model.requests[n].messages
            if message.role == "user"
            for block in message.content
        ]


@dataclass
class MainRig:
    """A root whose agent ``main`` runs on a scripted model."""

    root: Context
    model: ScriptedModel

    @property
    def agent(self) -> LoopAgent:
        return cast("LoopAgent", self.root.agents.get("main"))


async def cancelled_while_streaming(model: ScriptedModel, agent: LoopAgent, message: str) -> None:
    """Send ``agent`` ``message`` and cancel the turn once ``model``'s stream is open
    (it holds until then); returns when the agent is idle."""
    reached = anyio.Event()
    model.reply([Mark(reached), Wait(anyio.Event())])
    agent.send(message)
    await reached.wait()
    agent.cancel()
    await agent.when_idle()


def event_types(session: Session) -> list[str]:
    """The types of ``session``'s events, in order."""
    return [event.type for event in session.events]


def event_data(session: Session, kind: str) -> list[Mapping[str, Any]]:
    """The data of ``session``'s events of type ``kind``, in order."""
    return [event.data for event in session.events if event.type == kind]


def without_session_line(err: str) -> str:
    """``dsh run``'s stderr without the ``session: <id>`` line it ends with (which it
    asserts is there)."""
    head, _, last = err.rstrip("\n").rpartition("\n")
    assert re.fullmatch(r"session: [0-9a-f]{32}", last), err
    return f"{head}\n" if head else ""


def stored_seqs(records: Sequence[Mapping[str, Any]]) -> list[int]:
    """The event seqs the records of a session file hold, in order: one per record, and
    one per chunk of a packed ``assistant/chunks`` row (its members follow its seq)."""
    seqs: list[int] = []
    for record in records:
        count = len(record["data"]["chunks"]) if record["type"] == "assistant/chunks" else 1
        seqs.extend(range(record["seq"], record["seq"] + count))
    return seqs


def dsh_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``dsh ARGS`` run in this process (``cli.main``): its exit status, stdout, stderr."""
    from dsh import cli

    status = cli.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def dsh_refused(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    """The stderr lines of ``dsh ARGS`` run in this process, which must fail (exit 1)
    and write nothing to stdout."""
    status, out, err = dsh_main(capsys, *args)
    assert (status, out) == (1, ""), err
    return err.splitlines()


def entry_after(first: str, entry: str, plugin: str, config: str) -> str:
    """Deployment YAML of two entries: ``first`` on line 1, then ``entry`` of ``plugin``
    on line 2, its ``config:`` on line 4 followed by ``config``."""
    return f"{first}\n- id: {entry}\n  name: {plugin}\n  config: {config}\n"


def quoting_model_plugin(answer: str, imports: str = "") -> str:
    """The source of a model plugin module serving ``scripted``: a tool result in the last
    message is answered with ``result: <its content>``; anything else with ``answer``, the
    rest of ``respond(request)`` (``last`` is the last message's first block), written
    at the left margin. ``imports`` go above the ones it needs itself."""
    body = textwrap.indent(textwrap.dedent(answer).strip("\n"), "    ")
    return f"""\
{imports}from dsh.testing import ScriptedModel, text, tool_call, tool_calls
from dsh_llm import ToolResultBlock

inject = ["llm"]


def respond(request):
    last = request.messages[-1].content[0]
    if isinstance(last, ToolResultBlock):
        return text(f"result: {{last.content}}")
{body}


def apply(ctx, config):
    return ScriptedModel(respond=respond).install(ctx)
"""
