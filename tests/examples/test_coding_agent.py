"""The coding-agent example through the real ``dsh`` command, against a loopback server
that speaks the OpenAI-compatible streaming wire format; then SIGKILL and resume."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_bash import BashSandbox
from dsh_context_files import PREAMBLE as CONTEXT_PREAMBLE
from dsh_fs_local import DEFAULT_DENY_READ
from dsh_tool_bash import GUIDANCE as BASH_GUIDANCE
from dsh_tool_bash import sandbox_guidance
from dsh_tool_fs import SECTIONS as FS_SECTIONS
from dsh_tool_jobs import GUIDANCE as JOBS_GUIDANCE
from dsh_tool_web import FETCH_GUIDANCE
from tests.core.lifeline_support import await_line, marked, ready_pipe, survivors
from tests.http_support import Loopback, QuietHandler
from tests.support import EXAMPLES, run_dsh, stored_seqs

EXAMPLE = EXAMPLES / "coding-agent" / "dsh.yml"
PERSONA = (
    "You are coding-agent, powered by deepseek-chat. You help a developer understand and "
    "change their code: read carefully, explain briefly, and propose small, tested changes."
)
STALL = "stall"
TOOLS = [
    "bash",
    "edit",
    "glob",
    "grep",
    "job_kill",
    "job_list",
    "job_output",
    "list_agents",
    "read",
    "send_message",
    "skill",
    "subagent",
    "subagent_fork",
    "todo_write",
    "web_fetch",
    "write",
]
#: A folder outside the temp dir where a test may make (and remove) a folder.
VAR_TMP = "/var/tmp"
#: The example's sandbox: workspace-write, the defaults of bash-local otherwise.
SANDBOX = BashSandbox(
    mode="workspace-write",
    writable_roots=(".", tempfile.gettempdir()),
    network=False,
    deny_read=DEFAULT_DENY_READ,
)


def text_frames(text: str) -> list[dict[str, Any]]:
    """An answer streamed word by word, then the usage-only final chunk."""
    frames: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]}
        for word in text.split()
    ]
    frames.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    frames.append({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}})
    return frames


def tool_call_frames(name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """One call of tool ``name``, then the finish asking for tool results."""
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return [
        {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]


class Wire:
    """A scripted chat-completions server on 127.0.0.1 (one reply per request)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.replies: queue.Queue[list[dict[str, Any]] | str] = queue.Queue()
        self.stalled = threading.Event()
        self.release = threading.Event()
        wire = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.0"  # a stream ends when the connection does

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                wire.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                reply = wire.replies.get(timeout=30)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                frames = text_frames("Working on it") if reply == STALL else reply
                for frame in frames[:1] if reply == STALL else frames:
                    self.wfile.write(f"data: {json.dumps(frame)}\n\n".encode())
                    self.wfile.flush()
                if reply == STALL:
                    wire.stalled.set()
                    wire.release.wait(60)
                    return
                self.wfile.write(b"data: [DONE]\n\n")

        self.server = Loopback(Handler)
        self.url = self.server.root

    def close(self) -> None:
        self.release.set()
        self.server.close()


@pytest.fixture
def wire() -> Iterator[Wire]:
    server = Wire()
    yield server
    server.close()


def environ(wire: Wire) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPSEEK_", "DSH_"))}
    env.update(DEEPSEEK_API_KEY="sk-test-key", DEEPSEEK_BASE_URL=wire.url)
    return env


def session_ids(root: Path) -> list[str]:
    return sorted(p.name for p in (root / ".dsh" / "sessions").iterdir() if p.is_dir())


def stored_records(root: Path, session_id: str) -> list[dict[str, Any]]:
    path = root / ".dsh" / "sessions" / session_id / "session.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def test_one_shot_streams_the_answer_and_sends_what_the_model_must_see(
    wire: Wire, tmp_path: Path
) -> None:
    wire.replies.put(text_frames("Hello from the model"))
    done = run_dsh("run", str(EXAMPLE), "-p", "Explain main.py", cwd=tmp_path, env=environ(wire))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello from the model"
    (request,) = wire.requests
    assert request["path"] == "/chat/completions"
    assert request["auth"] == "Bearer sk-test-key"
    body = request["body"]
    assert body["model"] == "deepseek-chat"
    assert body["stream"] is True
    system, user = body["messages"]
    assert system["role"] == "system"
    # The identity, then the persona; the tools' own guidance sections follow.
    assert system["content"].startswith(f"You are an AI agent powered by dsh.\n\n{PERSONA}\n\n")
    assert user == {"role": "user", "content": "Explain main.py"}
    assert [tool["function"]["name"] for tool in body["tools"]] == TOOLS
    (session,) = session_ids(tmp_path)
    listed = run_dsh("sessions", str(EXAMPLE), cwd=tmp_path, env=environ(wire))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(session)
    assert "1 turn  tokens 12 in / 3 out  agent main  model deepseek-chat" in listed.stdout
    assert listed.stdout.endswith('  "Explain main.py"\n')


def test_the_model_delegates_to_a_subagent_that_sees_only_its_prompt(
    wire: Wire, tmp_path: Path
) -> None:
    task = "List the Python files under src/ and say how many there are."
    wire.replies.put(tool_call_frames("subagent", {"description": "count files", "prompt": task}))
    wire.replies.put(text_frames("There are 3 Python files."))
    wire.replies.put(text_frames("Your project has 3 Python files."))
    done = run_dsh("run", str(EXAMPLE), "-p", "How big is it?", cwd=tmp_path, env=environ(wire))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Your project has 3 Python files."
    assert "[tool] subagent " in done.stderr
    assert "  [spawn-" in done.stderr  # the child's answer, indented under the call
    parent, child, after = (request["body"] for request in wire.requests)
    # The child starts with the deployment's system prompt and the task alone.
    system, user = child["messages"]
    assert system == parent["messages"][0]
    assert user == {"role": "user", "content": task}
    # Its answer is the tool result the parent reads next.
    assert after["messages"][-1]["role"] == "tool"
    assert after["messages"][-1]["content"] == "There are 3 Python files. "


def test_a_missing_key_fails_at_once_naming_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPSEEK_", "DSH_"))}
    done = run_dsh("run", str(EXAMPLE), "-p", "hi", cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert "environment variable DEEPSEEK_API_KEY is not set" in done.stderr
    assert not (tmp_path / ".dsh").exists()


def test_killed_mid_turn_then_resumed_loses_nothing_committed(wire: Wire, tmp_path: Path) -> None:
    wire.replies.put(STALL)
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh", "run", str(EXAMPLE), "-p", "Refactor utils.py"],
        cwd=tmp_path,
        env=environ(wire),
        stdin=subprocess.DEVNULL,  # not the test runner's: -p would read a pipe as context
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # The model has started answering: the user's message is committed by now.
        assert wire.stalled.wait(30), "the model was never called"
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    finally:
        if process.poll() is None:  # pragma: no cover - only when an assert above failed
            process.kill()
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    (session,) = session_ids(tmp_path)
    before = stored_records(tmp_path, session)
    assert [r["type"] for r in before][:2] == ["turn/start", "user/message"]
    assert before[1]["data"]["message"]["content"][0]["text"] == "Refactor utils.py"

    wire.replies.put(text_frames("Done refactoring"))
    resumed = run_dsh(
        "run", str(EXAMPLE), "--resume", session, "-p", "Continue", cwd=tmp_path, env=environ(wire)
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "Done refactoring"
    assert f'resumed session {session} (1 turn) as agent "main"' in resumed.stderr
    # The killed turn got no answer: it is kept in the log and left out of the
    # history (RFC 0009), and the user is told so.
    assert "its message is not part of the conversation" in resumed.stderr
    assert "'Refactor utils.py'" in resumed.stderr
    messages = wire.requests[-1]["body"]["messages"]
    assert [(m["role"], m.get("content")) for m in messages[1:]] == [("user", "Continue")]
    after = stored_records(tmp_path, session)
    assert after[: len(before)] == before
    ends = [r["data"] for r in after if r["type"] == "turn/end"]
    assert ends == [
        {"turn": 1, "reason": {"kind": "interrupted"}},
        {"turn": 2, "reason": {"kind": "completed"}},
    ]
    seqs = stored_seqs(after)  # contiguous, a packed row of chunks counting each chunk
    assert seqs == list(range(len(seqs)))


def test_prompt_shows_the_sections_in_order_and_the_tools(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPSEEK_", "DSH_"))}
    env["DEEPSEEK_API_KEY"] = "unused"
    done = run_dsh("prompt", str(EXAMPLE), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    prompt, tools = done.stdout.split(f"\n\n--- tools ({len(TOOLS)}) ---\n")
    # ARCHITECTURE §6's order: the files (100-104), the shell (105), jobs (106), the
    # web (111); each tool package owns its section.
    assert prompt.split("\n\n") == [
        "You are an AI agent powered by dsh.",
        PERSONA,
        *(section.text for section in FS_SECTIONS),
        f"{BASH_GUIDANCE} {sandbox_guidance(SANDBOX)}",
        JOBS_GUIDANCE,
        FETCH_GUIDANCE,
    ]
    assert "bash" not in PERSONA  # the persona names no tool
    assert "tool" not in PERSONA
    names = [line.split('"')[3] for line in tools.splitlines() if line.startswith('  "name"')]
    assert names == TOOLS
    assert '"run_in_background"' in tools
    assert '"unsandboxed"' in tools  # the example runs commands in a sandbox


def test_the_projects_agents_md_joins_the_prompt_after_the_persona(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPSEEK_", "DSH_"))}
    env["DEEPSEEK_API_KEY"] = "unused"
    (tmp_path / "AGENTS.md").write_text("Run the tests with `make test`.\n")
    done = run_dsh("prompt", str(EXAMPLE), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    prompt = done.stdout.split("\n\n--- tools")[0]
    agents_md = (tmp_path / "AGENTS.md").resolve()
    quoted = f'<file path="{agents_md}">\nRun the tests with `make test`.\n\n</file>'
    assert f"{PERSONA}\n\n{CONTEXT_PREAMBLE}\n\n{quoted}\n\n" in prompt
    # Compaction is loaded with deepseek-chat's window: the check passes.
    checked = run_dsh("check", str(EXAMPLE), cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stderr


def test_killed_while_a_subagents_command_runs_leaves_no_process(
    wire: Wire, tmp_path: Path
) -> None:
    # The parent delegates; the child runs a command that starts grandchildren and says
    # so on a named pipe; then dsh is SIGKILLed. Nothing of the command may survive it.
    mark = f"lifeline-{uuid.uuid4().hex}"
    ready = ready_pipe(tmp_path)
    command = f"sleep 1000 & sleep 1000 & echo {mark} > {ready}; wait"
    wire.replies.put(tool_call_frames("subagent", {"description": "busy", "prompt": "go"}))
    wire.replies.put(tool_call_frames("bash", {"command": command, "description": "busy"}))
    env = environ(wire) | {"LIFELINE_TEST_MARK": mark}
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh", "run", str(EXAMPLE), "--yes", "-p", "Delegate"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        said = await_line(ready, process.pid)
        assert said == f"{mark}\n".encode(), "dsh ended before the child's command ran"
        assert len(marked(mark)) >= 3  # the shell and its two sleeps (dsh carries it too)
        process.kill()
    finally:
        if process.poll() is None:
            process.kill()
    assert survivors(process, mark) == []


def test_commands_run_in_the_sandbox_without_asking_and_leaving_it_is_declined(
    wire: Wire, tmp_path: Path
) -> None:
    # -p without --yes: the sandboxed command runs (policy ask does not ask about it)
    # and cannot write outside the session's cwd and the temp dir (tmp_path is in the
    # temp dir: the folder outside both is made elsewhere); the escalation is declined.
    outside = Path(tempfile.mkdtemp(dir=VAR_TMP))
    assert not outside.is_relative_to(os.path.realpath(tempfile.gettempdir()))
    command = f"echo in > inside.txt; echo x > {outside}/f"
    wire.replies.put(tool_call_frames("bash", {"command": command}))
    wire.replies.put(tool_call_frames("bash", {"command": "true", "unsandboxed": True}))
    wire.replies.put(text_frames("Done"))
    try:
        done = run_dsh("run", str(EXAMPLE), "-p", "Write", cwd=tmp_path, env=environ(wire))
        written = list(outside.iterdir())
    finally:
        shutil.rmtree(outside)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "inside.txt").read_text() == "in\n"
    assert written == []
    sandboxed, escalated = (request["body"]["messages"][-1] for request in wire.requests[1:])
    assert sandboxed["content"].endswith("[exit code: 1]")
    assert "Read-only file system" in sandboxed["content"]
    assert escalated["content"] == "Error: the user declined: unsandboxed bash: true"
    assert "[approval] declined: unsandboxed bash: true" in done.stderr
    assert "[approval] declined: bash:" not in done.stderr  # the sandboxed one was not asked
