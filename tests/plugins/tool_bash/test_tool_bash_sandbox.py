"""The bash tool with a sandbox on (issue 25, ARCHITECTURE §6.13): the `unsandboxed`
parameter only then, the escalation asking even under `policy: allow`, sandboxed calls
not asked under `ask` unless `ask_sandboxed`, background jobs in the sandbox, `dsh run
-p` refusing an escalation without `--yes`, the guidance text, and disposal."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from dsh import Context, cli
from dsh.testing import ScriptedModel, run_turn, tool_call, tool_calls, write_deployment
from dsh_agent_core import AgentCore
from dsh_approval import Approval, ApprovalRequest
from dsh_bash import Bash, BashSandbox
from dsh_bash_local import LocalBash
from dsh_jobs import Jobs
from dsh_sandbox import Sandbox
from dsh_system_prompt import SystemPrompt, render_prompt
from dsh_tool_bash import (
    GUIDANCE,
    LEAVE_SENTENCE,
    BashArgs,
    SandboxedBashArgs,
    ToolBash,
    sandbox_guidance,
)
from dsh_tools import ToolCall, ToolResult, Tools
from tests.plugins.bash.bash_support import tool_runtime
from tests.plugins.bash_local.sandbox_support import SANDBOXED, Recording, sandboxed_shell
from tests.support import event_data, quoting_model_plugin

pytestmark = pytest.mark.anyio

TEMP = tempfile.gettempdir()


async def bash(root: Context, **arguments: Any) -> ToolResult:
    outcome: ToolResult = await root.tools.execute("bash", arguments, ToolCall("c1"))
    return outcome


async def schema(root: Context) -> dict[str, Any]:
    assembly = await root.system_prompt.assemble()
    (tool,) = [t for t in assembly.tools if t.name == "bash"]
    return dict(tool.parameters)


async def guidance(root: Context) -> str:
    assembly = await root.system_prompt.assemble()
    (section,) = [s for s in assembly.sections if s.name == "tool:bash"]
    said: str = section.text
    return said


class Asked:
    """An approval responder answering ``answer`` and keeping each request."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        self.requests.append(request)
        return self.answer


# -- the schema ------------------------------------------------------------------------------


async def test_unsandboxed_is_offered_only_with_a_sandbox_on() -> None:
    async with tool_runtime() as root:
        await root.plugin(ToolBash)
        plain = await schema(root)
    async with sandboxed_shell(tools=True) as (root, _):
        tool = await root.plugin(ToolBash)
        offered = await schema(root)
        await root.plugin(Jobs)
        await tool  # restarted: the schema follows
        both = await schema(root)
    assert plain == BashArgs.model_json_schema()  # unchanged without a sandbox
    assert "unsandboxed" not in plain["properties"]
    assert offered == SandboxedBashArgs.model_json_schema()
    assert offered["properties"]["unsandboxed"] == {
        "default": False,
        "description": (
            "Run the command outside the sandbox; the user is asked to allow it first. "
            "Only for a command that failed because of the sandbox and must run."
        ),
        "title": "Unsandboxed",
        "type": "boolean",
    }
    assert {"run_in_background", "unsandboxed"} <= set(both["properties"])


async def test_the_schema_follows_the_executors_sandbox_whichever_loads_first() -> None:
    async with Context() as root:
        await root.plugin(Sandbox)
        root.sandbox.set_mechanism(Recording())
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Bash)
        tool = await root.plugin(ToolBash)  # before the executor
        assert "unsandboxed" not in (await schema(root))["properties"]
        local = await root.plugin(LocalBash, {"sandbox": "read-only"})
        await tool
        assert "unsandboxed" in (await schema(root))["properties"]
        await local.dispose()
        await tool
        assert "unsandboxed" not in (await schema(root))["properties"]
        assert await guidance(root) == GUIDANCE


async def test_unsandboxed_without_a_sandbox_is_refused() -> None:
    async with tool_runtime() as root:
        await root.plugin(ToolBash)
        done = await bash(root, command="true", unsandboxed=True)
    assert (done.is_error, done.code) == (True, "INVALID_ARGS")
    assert done.content == (
        "Error: unsandboxed is unavailable: commands here do not run in a sandbox "
        "(bash-local sandbox: off)"
    )


# -- the guidance ----------------------------------------------------------------------------


async def test_the_guidance_says_what_the_sandbox_allows_and_how_to_leave_it() -> None:
    async with sandboxed_shell(tools=True) as (root, _):
        await root.plugin(ToolBash)
        text = await guidance(root)
    assert text == f"{GUIDANCE} {sandbox_guidance(root_sandbox_default())}"
    assert text == (
        f"{GUIDANCE} Commands run in a sandbox: they can write only in the session's "
        f"working directory and `{TEMP}` (elsewhere a write fails with `Read-only file "
        "system` or `Permission denied`). The network is off: connections and name "
        "lookups fail. Files matching `~/.ssh/**`, `~/.aws/**` and `~/.gnupg/**` cannot "
        f"be read. {LEAVE_SENTENCE}"
    )
    assert "`unsandboxed: true`" in LEAVE_SENTENCE


def root_sandbox_default() -> BashSandbox:
    return BashSandbox(
        mode="workspace-write",
        writable_roots=(".", TEMP),
        network=False,
        deny_read=("~/.ssh/**", "~/.aws/**", "~/.gnupg/**"),
    )


@pytest.mark.parametrize(
    ("sandbox", "said"),
    [
        (
            BashSandbox(mode="read-only", writable_roots=(), network=True),
            "Commands run in a read-only sandbox: they cannot create, change or delete any "
            "file (a write fails with `Read-only file system` or `Permission denied`). "
            f"They may use the network. {LEAVE_SENTENCE}",
        ),
        (
            BashSandbox(mode="workspace-write", writable_roots=()),
            "Commands run in a read-only sandbox: they cannot create, change or delete any "
            "file (a write fails with `Read-only file system` or `Permission denied`). "
            f"The network is off: connections and name lookups fail. {LEAVE_SENTENCE}",
        ),
        (
            BashSandbox(
                mode="workspace-write",
                writable_roots=("build", "~/.cache", "/srv/x"),
                deny_read=("/etc/shadow",),
            ),
            "Commands run in a sandbox: they can write only in `build` (in the session's "
            "working directory), `~/.cache` and `/srv/x` (elsewhere a write fails with "
            "`Read-only file system` or `Permission denied`). The network is off: "
            "connections and name lookups fail. Files matching `/etc/shadow` cannot be "
            f"read. {LEAVE_SENTENCE}",
        ),
    ],
)
def test_the_guidance_of_each_setting(sandbox: BashSandbox, said: str) -> None:
    assert sandbox_guidance(sandbox) == said


# -- approvals -------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["allow", "ask"])
async def test_an_unsandboxed_call_always_asks_and_runs_outside_the_sandbox(
    policy: str,
) -> None:
    asked = Asked()
    async with sandboxed_shell(tools=True) as (root, mechanism):
        await root.plugin(Approval, {"policy": policy})
        root.approval.set_responder(asked)
        await root.plugin(ToolBash)
        done = await bash(root, command=f"echo ${SANDBOXED}-out", unsandboxed=True)
    assert done.content == "-out\n"
    assert mechanism.policies == []
    (request,) = asked.requests
    assert (request.kind, request.title, request.detail, request.always_ask) == (
        "bash",
        f"unsandboxed bash: echo ${SANDBOXED}-out",
        f"echo ${SANDBOXED}-out",
        True,
    )


@pytest.mark.parametrize(
    ("policy", "answer", "content"),
    [
        ("allow", False, "Error: the user declined: unsandboxed bash: touch {marker}"),
        (
            "deny",
            True,
            "Error: refused by the approval policy (deny): unsandboxed bash: touch {marker}",
        ),
    ],
)
async def test_a_declined_or_refused_escalation_does_not_run(
    tmp_path: Path, policy: str, answer: bool, content: str
) -> None:
    marker = tmp_path / "ran"
    async with sandboxed_shell(tools=True) as (root, _):
        await root.plugin(Approval, {"policy": policy})
        root.approval.set_responder(Asked(answer))
        await root.plugin(ToolBash)
        done = await bash(root, command=f"touch {marker}", unsandboxed=True)
    assert (done.is_error, done.code) == (True, "APPROVAL_DENIED")
    assert done.content == content.format(marker=marker)
    assert not marker.exists()


async def test_an_escalation_without_the_approval_service_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    async with sandboxed_shell(tools=True) as (root, _):
        await root.plugin(ToolBash)
        done = await bash(root, command=f"touch {marker}", unsandboxed=True)
    assert (done.is_error, done.code) == (True, "INVALID_ARGS")
    assert done.content == (
        "Error: unsandboxed commands need a person to allow them: load the approval "
        "plugin (none is loaded here)"
    )
    assert not marker.exists()


@pytest.mark.parametrize(
    ("policy", "config", "asks", "runs"),
    [
        ("ask", {}, False, True),
        ("ask", {"ask_sandboxed": True}, True, True),
        ("allow", {}, False, True),
        ("allow", {"ask_sandboxed": True}, False, True),
        ("deny", {}, False, False),
    ],
)
async def test_a_sandboxed_call_is_asked_about_only_when_configured(
    policy: str, config: dict[str, Any], asks: bool, runs: bool
) -> None:
    asked = Asked()
    async with sandboxed_shell(tools=True) as (root, mechanism):
        await root.plugin(Approval, {"policy": policy})
        root.approval.set_responder(asked)
        await root.plugin(ToolBash, config)
        done = await bash(root, command=f"echo ${SANDBOXED}")
    assert [r.title for r in asked.requests] == ([f"bash: echo ${SANDBOXED}"] if asks else [])
    assert all(not r.always_ask for r in asked.requests)
    assert (done.content == "1\n", len(mechanism.policies)) == (runs, int(runs))


async def test_without_a_sandbox_every_call_is_still_asked_under_ask() -> None:
    asked = Asked()
    async with tool_runtime() as root:
        await root.plugin(Approval, {"policy": "ask"})
        root.approval.set_responder(asked)
        await root.plugin(ToolBash)
        await bash(root, command="true")
    assert [(r.title, r.always_ask) for r in asked.requests] == [("bash: true", False)]


# -- the session's directory, background jobs ------------------------------------------------


async def test_the_writable_root_is_the_sessions_cwd_whatever_the_workdir(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    calls = tool_calls(tool_call("bash", {"command": "pwd", "workdir": "sub"}))
    mechanism = Recording()
    async with Context() as root:
        await root.plugin(
            AgentCore, {"model": "scripted", "agents": [{"id": "main", "cwd": str(tmp_path)}]}
        )
        ScriptedModel(calls, "done").install(root)
        await root.plugin(Sandbox)
        root.sandbox.set_mechanism(mechanism)
        await root.plugin(Bash)
        await root.plugin(LocalBash, {"sandbox": "workspace-write", "writable_roots": ["."]})
        await root.plugin(ToolBash)
        agent = root.agents.get("main")
        assert await run_turn(agent, "go") == {"kind": "completed"}
        (result,) = event_data(agent.session, "tool/result")
    assert result["content"] == f"{tmp_path / 'sub'}\n"
    (policy,) = mechanism.policies
    assert (policy.writable_roots, policy.cwd) == ((str(tmp_path),), str(tmp_path / "sub"))


async def test_a_background_job_runs_in_the_sandbox_and_can_leave_it() -> None:
    asked = Asked()
    async with sandboxed_shell(tools=True) as (root, mechanism):
        await root.plugin(Approval, {"policy": "ask"})
        root.approval.set_responder(asked)
        await root.plugin(Jobs)
        await root.plugin(ToolBash)
        inside = await bash(root, command=f"echo ${SANDBOXED}-in", run_in_background=True)
        outside = await bash(
            root, command=f"echo ${SANDBOXED}-out", run_in_background=True, unsandboxed=True
        )
        jobs = [root.jobs.get("j1"), root.jobs.get("j2")]
        for job in jobs:
            await job.wait()
        outputs = [job.read_new()[0].text for job in jobs]
    assert (inside.content, outside.content) == (
        "started background job j1",
        "started background job j2",
    )
    assert outputs == ["1-in\n", "-out\n"]
    assert len(mechanism.policies) == 1
    assert [r.title for r in asked.requests] == [f"unsandboxed bash: echo ${SANDBOXED}-out"]


async def test_an_unavailable_sandbox_is_the_tools_error_result() -> None:
    mechanism = Recording(fail="bubblewrap: not found; landlock: not supported by this kernel")
    async with sandboxed_shell(mechanism, tools=True) as (root, _):
        await root.plugin(Jobs)
        await root.plugin(ToolBash)
        done = await bash(root, command="true")
        background = await bash(root, command="true", run_in_background=True)
        assert root.jobs.list() == []
    for outcome in (done, background):
        assert (outcome.is_error, outcome.code) == (True, "SANDBOX_UNAVAILABLE")
        assert outcome.content == (
            "Error: bubblewrap: not found; landlock: not supported by this kernel"
        )


# -- disposal --------------------------------------------------------------------------------


async def test_unloading_the_tool_in_a_sandbox_removes_its_section_and_schema() -> None:
    async with sandboxed_shell(tools=True) as (root, _):
        before = render_prompt(await root.system_prompt.assemble())
        fiber = await root.plugin(ToolBash)
        assert "unsandboxed" in render_prompt(await root.system_prompt.assemble())
        await fiber.dispose()
        after = await root.system_prompt.assemble()
        assert render_prompt(after) == before
        assert after.tools == []
        assert root.tools._global.tools == {}


# -- dsh run -p ------------------------------------------------------------------------------

MECHANISM = """\
from tests.plugins.bash_local.sandbox_support import Recording

inject = ["sandbox"]


def apply(ctx, config):
    return ctx.sandbox.set_mechanism(Recording())
"""

MODEL = quoting_model_plugin(
    """
    return tool_calls(
        tool_call("bash", {"command": "printf LEFT${SANDBOXED}", "unsandboxed": True})
    )
    """.replace("${SANDBOXED}", f"${SANDBOXED}")
)

DEPLOYMENT = """\
- {id: model, name: ./model.py}
- {id: core, name: agent-core, config: {model: scripted}}
- {id: sandbox, name: sandbox}
- {id: mechanism, name: ./mechanism.py}
- {id: bash, name: bash}
- {id: bash-local, name: bash-local, config: {sandbox: workspace-write}}
- {id: tool-bash, name: tool-bash}
- {id: approval, name: approval, config: {policy: allow}}
"""


def test_dsh_run_p_refuses_an_escalation_without_yes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "mechanism.py").write_text(MECHANISM)
    path = write_deployment(tmp_path, DEPLOYMENT)
    assert cli.main(["run", str(path), "-p", "go"]) == 0
    refused = capsys.readouterr()
    assert cli.main(["run", str(path), "-p", "go", "--yes"]) == 0
    allowed = capsys.readouterr()
    title = f"unsandboxed bash: printf LEFT${SANDBOXED}"
    assert f"[approval] declined: {title} (a one-shot run asks nobody;" in refused.err
    assert refused.out == f"result: Error: the user declined: {title}\n"
    assert f"[approval] allowed (--yes): {title}" in allowed.err
    assert allowed.out == "result: LEFT\n"
