"""Every built-in tool refuses an argument it does not take (``INVALID_ARGS`` naming
it and what the tool takes) before it runs: a table over the tools a full deployment
offers, and the model meeting it in ``dsh run``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dsh import Context, load_deployment
from dsh.testing import write_deployment
from dsh_llm import BlockEnd, BlockStart, Finish, TextDelta, ToolCallDelta
from dsh_tools import ToolResult
from tests.plugins.llm_replay.replay_support import write_replay
from tests.support import ECHO, run_dsh

pytestmark = pytest.mark.anyio

#: Every built-in tool plugin, as a deployment offers them (the search provider is a
#: port nothing listens on: no call gets that far).
TOOL_PLUGINS = """\
- {id: sessions, name: session-jsonl, config: {root: sessions}}
- {id: bash, name: bash}
- {id: bash-local, name: bash-local}
- {id: tool-bash, name: tool-bash}
- {id: jobs, name: jobs}
- {id: tool-jobs, name: tool-jobs}
- {id: tool-todo, name: tool-todo}
- {id: fs, name: fs}
- {id: fs-local, name: fs-local}
- {id: tool-fs, name: tool-fs}
- {id: web, name: web}
- {id: web-fetch, name: web-fetch}
- {id: searxng, name: web-searxng, config: {base_url: "http://127.0.0.1:9"}}
- {id: tool-web, name: tool-web}
- {id: subagent, name: subagent}
- {id: subagent-spawn, name: subagent-spawn}
- {id: subagent-fork, name: subagent-fork}
- {id: tool-subagent, name: tool-subagent, config: {provider: spawn}}
- id: tool-subagent-fork
  name: tool-subagent
  config: {provider: fork, tool_name: subagent_fork}
"""

#: A call each tool would run, and what its refusal lists the tool as taking.
CALLS: dict[str, tuple[dict[str, Any], str]] = {
    "bash": (
        {"command": "touch ran"},
        "takes: command, description, timeout_ms, workdir, run_in_background",
    ),
    "edit": (
        {"file_path": "ran", "old_string": "a", "new_string": "b"},
        "takes: file_path, old_string, new_string, replace_all",
    ),
    "glob": ({"pattern": "*"}, "takes: pattern, path"),
    "grep": ({"pattern": "x"}, "takes: pattern, path, glob, case_insensitive"),
    "job_kill": ({"job_id": "j1"}, "takes: job_id"),
    "job_list": ({}, "takes no arguments"),
    "job_output": ({"job_id": "j1"}, "takes: job_id, wait, timeout_ms"),
    "list_agents": ({}, "takes no arguments"),
    "read": ({"file_path": "ran"}, "takes: file_path, offset, limit"),
    "send_message": ({"subagent_id": "x", "message": "hi"}, "takes: subagent_id, message"),
    "subagent": (
        {"description": "d", "prompt": "touch ran"},
        "takes: description, prompt, run_in_background",
    ),
    "subagent_fork": (
        {"description": "d", "prompt": "touch ran"},
        "takes: description, prompt, run_in_background",
    ),
    "todo_write": ({"todos": []}, "takes: todos"),
    "web_fetch": ({"url": "http://127.0.0.1:9/"}, "takes: url"),
    "web_search": ({"queries": ["x"]}, "takes: queries"),
    "write": ({"file_path": "ran", "content": "x"}, "takes: file_path, content"),
}


async def test_every_built_in_tool_refuses_an_argument_it_does_not_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(ECHO.parent / "mock_model.py", tmp_path / "mock_model.py")
    path = tmp_path / "dsh.yml"
    path.write_text(
        "- {id: model, name: ./mock_model.py}\n- {id: core, name: agent-core, config: "
        "{model: echo-mock}}\n" + TOOL_PLUGINS,
        encoding="utf-8",
    )
    async with Context() as root:
        await load_deployment(path, root)
        offered = [tool.name for tool in (await root.system_prompt.assemble()).tools]
        assert sorted(offered) == sorted(CALLS)  # a new tool joins the table
        for name, (arguments, takes) in CALLS.items():
            assert await root.tools.execute(name, {**arguments, "foo": 1}) == ToolResult(
                f'invalid arguments: unknown argument "foo" ({name} {takes})', True, "INVALID_ARGS"
            )
    assert not (tmp_path / "ran").exists()  # no tool ran


def test_the_model_is_told_which_argument_the_tool_does_not_take(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the notes\n", encoding="utf-8")
    call = json.dumps({"file_path": "notes.txt", "path": "notes.txt"})
    write_replay(
        tmp_path / "replay.jsonl",
        (
            1,
            1,
            [
                BlockStart(0, "tool-call"),
                ToolCallDelta(0, "c1", call, name="read"),
                BlockEnd(0),
                Finish("tool-calls"),
            ],
        ),
        (
            1,
            2,
            [
                BlockStart(0, "text"),
                TextDelta(0, "I passed a wrong name."),
                BlockEnd(0),
                Finish("stop"),
            ],
        ),
    )
    path = write_deployment(
        tmp_path,
        """\
        - {id: core, name: agent-core, config: {model: replay}}
        - {id: replay, name: llm-replay, config: {file: replay.jsonl}}
        - {id: sessions, name: session-jsonl, config: {root: sessions}}
        - {id: fs, name: fs}
        - {id: fs-local, name: fs-local}
        - {id: tool-fs, name: tool-fs}
        """,
    )
    done = run_dsh("run", str(path), "-p", "read the notes", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "I passed a wrong name."
    [log] = (tmp_path / "sessions").glob("*/session.jsonl")
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    [result] = [r["data"] for r in records if r.get("type") == "tool/result"]
    assert result["content"] == (
        'invalid arguments: unknown argument "path" (read takes: file_path, offset, limit)'
    )
    assert result["code"] == "INVALID_ARGS"
