"""Hooks from Claude Code settings files: which files, in which order, and what a
malformed one says."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh import Context, DshError
from dsh.testing import ScriptedModel, capture_logs, run_turn, text, tool_call, tool_calls
from dsh_agent_core import AgentCore
from dsh_hooks import Hooks
from dsh_tools import Tool, ToolCall
from tests.plugins.hooks.hook_support import records, shell_hook
from tests.plugins.settings_support import own_home
from tests.plugins.settings_support import write_settings as write

pytestmark = pytest.mark.anyio


class NoArgs(BaseModel):
    pass


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return own_home(tmp_path, monkeypatch)


def post(*commands: str) -> dict[str, Any]:
    hooks = [{"type": "command", "command": command} for command in commands]
    return {"hooks": {"PostToolUse": [{"matcher": "echo", "hooks": hooks}]}}


def say(folder: Path, word: str) -> str:
    answer = json.dumps({"hookSpecificOutput": {"additionalContext": word}})
    return shell_hook(folder, word, f"echo '{answer}'")


async def echo_result(project: Path, config: dict[str, Any] | None = None) -> str:
    """What the model reads of one ``echo`` call with ``hooks`` loaded for ``project``."""
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        model = ScriptedModel(models=["m"])
        model.install(root)

        async def echo(args: NoArgs, call: ToolCall) -> str:
            return "ran"

        root.tools.register(Tool(name="echo", description="e", parameters=NoArgs, execute=echo))
        await root.plugin(Hooks, {"project_dir": str(project), **(config or {})})
        model.reply(tool_calls(tool_call("echo", {}, id="c1")), text("done"))
        await run_turn(root.agents.get("main"), "go")
        result: str = model.requests[1].messages[-1].content[0].content
        return result


async def test_settings_files_are_read_nearest_first_after_the_dsh_config(
    tmp_path: Path, home: Path
) -> None:
    project = tmp_path / "repo"
    sub = project / "sub"
    sub.mkdir(parents=True)
    write(home / ".claude" / "settings.json", post(say(tmp_path, "user")))
    write(project / ".claude" / "settings.json", post(say(tmp_path, "shared")))
    write(project / ".claude" / "settings.local.json", post(say(tmp_path, "local")))
    write(sub / ".claude" / "settings.json", post(say(tmp_path, "nearest")))
    write(sub / ".claude" / "settings.local.json", {"permissions": {"allow": []}})
    config = post(say(tmp_path, "yaml"))
    assert await echo_result(sub, config) == "ran\n\nyaml\nnearest\nshared\nlocal\nuser"


async def test_claude_settings_false_reads_no_file(tmp_path: Path, home: Path) -> None:
    write(tmp_path / ".claude" / "settings.json", post(say(tmp_path, "shared")))
    assert await echo_result(tmp_path, {"claude_settings": False}) == "ran"


async def test_a_command_in_two_files_runs_once(tmp_path: Path, home: Path) -> None:
    hook = say(tmp_path, "once")
    write(home / ".claude" / "settings.json", post(hook))
    write(tmp_path / ".claude" / "settings.json", post(hook))
    assert await echo_result(tmp_path) == "ran\n\nonce"
    assert len(records(tmp_path, "once")) == 1


async def test_what_dsh_does_not_run_is_left_out_with_a_warning(tmp_path: Path, home: Path) -> None:
    hook = say(tmp_path, "kept")
    data = {
        "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {
            "Notification": [{"hooks": [{"type": "command", "command": "true"}]}],
            "PostToolUse": [
                {"matcher": None, "hooks": [{"type": "prompt", "prompt": "judge"}]},
                {
                    "hooks": [
                        {"type": "command", "command": hook, "timeout": 30, "statusMessage": "x"}
                    ]
                },
            ],
        },
    }
    path = write(tmp_path / ".claude" / "settings.json", data)
    with capture_logs("dsh.hooks") as logs:
        assert await echo_result(tmp_path) == "ran\n\nkept"
    assert logs.messages(logging.WARNING) == [
        f"{path}: hooks.Notification is an event dsh does not run; left out",
        f"{path}: hooks.PostToolUse[0].hooks[0] is a 'prompt' hook; dsh runs command hooks "
        "only, left out",
    ]


@pytest.mark.parametrize(
    ("in_home", "content", "problem"),
    [
        # a malformed hooks key, named by its place
        (False, {"hooks": []}, "hooks must be an object, got list"),
        (False, {"hooks": {"Stop": {}}}, "hooks.Stop must be a list, got dict"),
        (False, {"hooks": {"Stop": ["x"]}}, r"hooks.Stop\[0\] must be an object, got str"),
        (False, {"hooks": {"Stop": [{}]}}, r"hooks.Stop\[0\].hooks must be a list, got NoneType"),
        (
            False,
            {"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}},
            r"Field required \(at hooks.Stop\[0\].hooks.0.command\)",
        ),
        (
            False,
            {"hooks": {"Stop": [{"matcher": "(", "hooks": []}]}},
            r"matcher '\(' is not a valid regex",
        ),
        # a settings file that is not a JSON object
        (True, "{oops", "not valid JSON"),
        (True, "[]", "object"),
    ],
)
async def test_a_malformed_settings_file_fails_the_load_naming_the_file_and_place(
    tmp_path: Path, home: Path, in_home: bool, content: Any, problem: str
) -> None:
    folder, name = (home, "settings.json") if in_home else (tmp_path, "settings.local.json")
    path = write(folder / ".claude" / name, content)
    with pytest.raises(DshError, match=problem) as caught:
        await echo_result(tmp_path)
    assert str(path) in str(caught.value)
