"""End to end from YAML: the coding-agent example's ``.claude`` hooks (a guard before
``bash``, a formatter after ``write``) on the real tools, driven by ``llm-replay``,
beside permission rules that allow the very calls the guard refuses."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from dsh import Context, load_deployment
from dsh.testing import run_turn, write_deployment
from dsh_llm import BlockEnd, BlockStart, Finish, TextDelta, ToolCallDelta
from tests.plugins.llm_replay.replay_support import write_replay
from tests.support import ROOT, event_data

pytestmark = pytest.mark.anyio

EXAMPLE = ROOT / "examples" / "coding-agent" / "hooks" / ".claude"

DEPLOYMENT = """\
- name: agent-core
  config: {model: replay, persona: "You are hooks-agent on {{model}}."}
- name: llm-replay
  config: {file: run.jsonl}
- name: approval
  config: {policy: allow}
- name: bash
- name: bash-local
- name: tool-bash
- name: fs
- name: fs-local
  config: {mode: workspace-write}
- name: fs-policy
- name: tool-fs
- name: permissions
  config: {allow: ["Bash(git push:*)", "Write"]}
- name: hooks
"""


async def test_the_examples_guard_and_formatter_run_from_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project / ".claude")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    # The formatter finds ruff where this Python has it.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(project)
    write_replay(
        project / "run.jsonl",
        (
            1,
            1,
            [
                BlockStart(0, "tool-call"),
                # Harmless if it ran (no repository here): the guard must refuse it anyway.
                ToolCallDelta(0, "c1", '{"command": "git push --force"}', name="bash"),
                BlockEnd(0),
                BlockStart(1, "tool-call"),
                ToolCallDelta(
                    1, "c2", '{"file_path": "x.py", "content": "x=[1,2]\\n"}', name="write"
                ),
                BlockEnd(1),
                Finish("tool-calls"),
            ],
        ),
        (1, 2, [BlockStart(0, "text"), TextDelta(0, "done"), BlockEnd(0), Finish("stop")]),
    )
    path = write_deployment(project, DEPLOYMENT)
    async with Context() as root:
        await load_deployment(path, root)
        agent = root.agents.get("main")
        assert await run_turn(agent, "clean up") == {"kind": "completed"}
        bash, write = event_data(agent.session, "tool/result")
    assert bash["content"] == (
        "Error: blocked by a hook: a force push is not allowed here; ask the user to run it"
    )
    assert bash["code"] == "HOOK_DENIED"
    assert write["is_error"] is False
    assert (project / "x.py").read_text() == "x = [1, 2]\n"
