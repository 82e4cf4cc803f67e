"""The ``permissions`` plugin on a runtime: rules decide tool calls through
``tool/before``, settings files add rules, "always" answers persist one, and unloading
leaves nothing behind."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel

from dsh import Context, DeploymentError, Fiber, load_deployment
from dsh.testing import ScriptedModel, run_turn, text, tool_call, tool_calls, write_deployment
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent
from dsh_approval import ALWAYS, Approval, ApprovalRequest
from dsh_permissions import Permissions, SettingsError, always_rules
from dsh_tools import Tool, ToolCall
from tests.support import event_data

pytestmark = pytest.mark.anyio


class Command(BaseModel):
    command: str


@dataclass
class Rig:
    root: Context
    model: ScriptedModel
    agent: LoopAgent
    project: Path
    plugin: Fiber
    ran: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    answers: list[bool | str] = field(default_factory=list)

    async def run(self, *commands: str) -> list[dict[str, Any]]:
        """One turn running each command through ``bash``; the results."""
        before = len(event_data(self.agent.session, "tool/result"))
        calls = [tool_call("bash", {"command": c}, id=f"c{i}") for i, c in enumerate(commands)]
        self.model.reply(tool_calls(*calls), text("done"))
        assert await run_turn(self.agent, "go") == {"kind": "completed"}
        return [dict(r) for r in event_data(self.agent.session, "tool/result")[before:]]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    monkeypatch.chdir(project)
    return project


def settings(path: Path, **permissions: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"permissions": permissions}), encoding="utf-8")


@asynccontextmanager
async def rig(project: Path, policy: str | None = "ask", **config: Any) -> AsyncIterator[Rig]:
    """agent-core (agent ``main`` working in ``project``), a fake ``bash`` tool that
    asks the approval service (``policy``; not loaded when None) before it runs, and
    the permissions plugin with ``config``."""
    async with Context() as root:
        if policy is not None:
            await root.plugin(Approval, {"policy": policy})
        await root.plugin(
            AgentCore, {"model": "m", "agents": [{"id": "main", "cwd": str(project)}]}
        )
        model = ScriptedModel(models=["m"])
        model.install(root)
        state = Rig(root, model, cast("LoopAgent", root.agents.get("main")), project, root.fiber)

        async def bash(args: Command, call: ToolCall) -> str:
            approval = root.get("approval")
            if approval is not None:
                await approval.require(ApprovalRequest("bash", f"bash: {args.command}", call=call))
            state.ran.append(args.command)
            return "ok"

        root.tools.register(Tool(name="bash", description="b", parameters=Command, execute=bash))
        if policy is not None:

            def respond(request: ApprovalRequest) -> bool | str:
                state.asked.append(request.title)
                return state.answers.pop(0) if state.answers else False

            root.approval.set_responder(respond)
        state.plugin = await root.plugin(Permissions, config)
        yield state


async def test_a_deny_rule_blocks_the_call_naming_the_rule(project: Path) -> None:
    async with rig(project, deny=["Bash(rm:*)"]) as r:
        [result] = await r.run("rm -rf build")
        assert r.ran == []
        assert r.asked == []
        assert result["code"] == "HOOK_DENIED"
        assert result["content"] == (
            'Error: blocked by a hook: denied by the permission rule "Bash(rm:*)" '
            "(the permissions plugin's config: deny[0])"
        )


async def test_an_allow_rule_runs_without_asking_and_no_match_asks(project: Path) -> None:
    async with rig(project, allow=["Bash(make:*)"]) as r:
        r.answers = [True]
        await r.run("make all", "ls")
        assert r.ran == ["make all", "ls"]
        assert r.asked == ["bash: ls"]


async def test_an_ask_rule_asks_even_under_policy_allow(project: Path) -> None:
    async with rig(project, "allow", ask=["Bash(git push:*)"], allow=["Bash"]) as r:
        r.answers = [False]
        [pushed] = await r.run("git push")
        assert r.asked == [
            'bash {"command": "git push"} (asked by the permission rule "Bash(git push:*)" '
            "(the permissions plugin's config: ask[0]))"
        ]
        assert pushed["code"] == "APPROVAL_DENIED"
        await r.run("git status")
        assert r.ran == ["git status"]


async def test_rules_come_from_the_settings_files(project: Path) -> None:
    settings(project / ".claude" / "settings.json", deny=["Bash(rm:*)"])
    settings(project / ".claude" / "settings.local.json", allow=["Bash(make:*)"])
    settings(Path.home() / ".claude" / "settings.json", allow=["Bash(ls)"])
    async with rig(project) as r:
        denied = (await r.run("rm x", "make", "ls", "pwd"))[0]
        assert str(project / ".claude" / "settings.json") in denied["content"]
        assert r.ran == ["make", "ls"]
        assert r.asked == ["bash: pwd"]


async def test_claude_settings_false_reads_no_file(project: Path) -> None:
    settings(project / ".claude" / "settings.json", deny=["Bash"])
    async with rig(project, claude_settings=False) as r:
        # No rule can ever cover a call: the plugin does not listen (costs a step nothing).
        assert r.root.events.event("tool/before").listeners() == ()
        r.answers = [True]
        await r.run("ls")
        assert r.ran == ["ls"]
        assert r.asked == ["bash: ls"]


async def test_always_persists_a_rule_that_applies_at_once(project: Path) -> None:
    target = project / ".dsh" / "settings.local.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"hooks": {"Stop": []}}))
    async with rig(project) as r:
        assert r.root.approval.remembers
        r.answers = [ALWAYS]
        await r.run("make test && make lint")
        assert json.loads(target.read_text()) == {
            "hooks": {"Stop": []},
            "permissions": {"allow": ["Bash(make test)", "Bash(make lint)"]},
        }
        await r.run("make test && make lint", "make lint")
        assert r.ran == ["make test && make lint"] * 2 + ["make lint"]
        assert len(r.asked) == 1


async def test_always_applies_at_once_with_claude_settings_false(project: Path) -> None:
    # The settings files are not read in this mode, so the rule written to
    # .dsh/settings.local.json is also kept in force by the plugin itself.
    settings(project / ".claude" / "settings.json", deny=["Bash"])
    async with rig(project, claude_settings=False) as r:
        events = r.root.events
        assert events.event("tool/before").listeners() == ()
        r.answers = [ALWAYS]
        await r.run("make test")
        target = project / ".dsh" / "settings.local.json"
        assert json.loads(target.read_text()) == {"permissions": {"allow": ["Bash(make test)"]}}
        assert len(events.event("tool/before").listeners()) == 1  # a rule can cover a call now
        await r.run("make test", "make lint")
        assert r.ran == ["make test", "make test"]  # the deny rule of the file is not read
        assert r.asked == ["bash: make test", "bash: make lint"]
        assert r.plugin.instance.rules_for(str(project / "sub")).allow  # under the project
        assert not r.plugin.instance.rules_for(str(project.parent)).allow  # not outside it
        await r.plugin.dispose()
        assert events.event("tool/before").listeners() == ()


async def test_always_applies_in_this_session_though_the_file_cannot_be_written(
    project: Path,
) -> None:
    async with rig(project) as r:
        (project / ".dsh").write_text("not a directory")
        r.answers = [ALWAYS]
        await r.run("make")
        await r.run("make")
        assert r.ran == ["make", "make"]
        assert r.asked == ["bash: make"]


async def test_an_always_that_cannot_be_written_is_logged_and_still_allows(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with rig(project) as r:
        (project / ".dsh").write_text("not a directory")
        r.answers = [ALWAYS]
        with caplog.at_level(logging.ERROR, logger="dsh.permissions"):
            await r.run("make")
        assert r.ran == ["make"]
        assert "could not remember the answer about bash: make" in caplog.text


async def test_an_always_about_a_request_without_a_call_persists_nothing(project: Path) -> None:
    async with rig(project) as r:
        r.answers = [ALWAYS]
        assert await r.root.approval.request(ApprovalRequest("bash", "bash: x"))
        assert not (project / ".dsh").exists()


async def test_without_the_approval_service_rules_still_decide(project: Path) -> None:
    async with rig(project, None, deny=["Bash(rm:*)"]) as r:
        denied = (await r.run("rm x", "ls"))[0]
        assert denied["code"] == "HOOK_DENIED"
        assert r.ran == ["ls"]


async def test_a_bad_settings_file_fails_the_start_naming_it(project: Path) -> None:
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text("{")
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        with pytest.raises(SettingsError, match=r"settings\.json:1:2: not valid JSON"):
            await root.plugin(Permissions, {})
        assert root.events.event("tool/before").listeners() == ()


async def test_a_bad_rule_in_the_config_is_named(project: Path) -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        with pytest.raises(Exception, match=r"the permissions plugin's config: allow\[1\]"):
            await root.plugin(Permissions, {"allow": ["Read", "Bash(x"]})


async def test_unloading_leaves_no_listener_behind(project: Path) -> None:
    async with rig(project, deny=["Bash"]) as r:
        events = r.root.events
        before = events.event("tool/before").listeners()
        assert len(before) == 1
        assert len(events.event("approval/always").listeners()) == 1
        await r.plugin.dispose()
        assert events.event("tool/before").listeners() == ()
        assert events.event("approval/always").listeners() == ()
        assert not r.root.approval.remembers
        r.answers = [True]
        await r.run("ls")
        assert r.ran == ["ls"]


@pytest.mark.parametrize(
    ("name", "arguments", "rules"),
    [
        ("bash", {"command": "make && make install"}, ["Bash(make)", "Bash(make install)"]),
        ("read", {"file_path": "/etc/hosts"}, ["Read(//etc/hosts)"]),
        ("edit", {"file_path": "/p/a.py"}, ["Edit(//p/a.py)"]),
        ("web_fetch", {"url": "https://example.com/x"}, ["WebFetch(domain:example.com)"]),
        ("web_fetch", {"url": "nowhere"}, ["WebFetch"]),
        ("todo_write", {}, ["TodoWrite"]),
        ("mcp__gh__issue", {}, ["mcp__gh__issue"]),
    ],
)
def test_always_rules(name: str, arguments: dict[str, Any], rules: list[str]) -> None:
    assert always_rules(ToolCall("c", name=name, arguments=arguments)) == rules


async def test_a_bad_settings_file_of_another_directory_refuses_its_calls(
    project: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".claude").mkdir(parents=True)
    (elsewhere / ".claude" / "settings.json").write_text('{"permissions": {"allow": 1}}')
    async with rig(project) as r:
        agent = cast("LoopAgent", r.root.agents.create("other", model="m", cwd=str(elsewhere)))
        r.model.reply(tool_calls(tool_call("bash", {"command": "ls"})), text("done"))
        await run_turn(agent, "go")
        [result] = event_data(agent.session, "tool/result")
        assert result["code"] == "HOOK_DENIED"
        assert '"permissions.allow" must be a list of rules' in result["content"]
        assert r.ran == []


async def test_a_yaml_deployment_loads_the_rules_and_refuses_bad_config(project: Path) -> None:
    path = write_deployment(
        project,
        """\
        - {id: core, name: agent-core, config: {model: m}}
        - {id: approval, name: approval, config: {policy: ask}}
        - id: rules
          name: permissions
          config: {deny: ["Bash(rm:*)"], claude_settings: false}
        """,
    )
    async with Context() as root:
        await load_deployment(path, root)
        [listener] = root.events.event("tool/before").listeners()
        decision = listener.fn(ToolCall("c", name="bash", arguments={"command": "rm x"}))
        assert decision.decision == "deny"
    bad = write_deployment(
        project, "- {id: rules, name: permissions, config: {allow: [1], extra: 2}}\n", "bad.yml"
    )
    async with Context() as root:
        with pytest.raises(DeploymentError) as caught:
            await load_deployment(bad, root)
    assert f"{bad}:1" in str(caught.value)
    assert "extra" in str(caught.value)
