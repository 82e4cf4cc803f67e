"""The bash tool: rendering, errors, the working directory, background jobs in the
schema, approvals, guidance ownership, cancellation and clean disposal."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dsh import ConfigError, Context
from dsh.testing import run_turn, text, tool_call, tool_calls
from dsh_approval import Approval, ApprovalRequest
from dsh_bash import Bash, BashResult, StreamOutput
from dsh_jobs import Jobs
from dsh_system_prompt import SystemPrompt, render_prompt
from dsh_tool_bash import DESCRIPTION, GUIDANCE, ToolBash, render_result
from dsh_tools import ToolCall, ToolResult, Tools
from tests.plugins.bash import bash_support
from tests.support import event_data

pytestmark = pytest.mark.anyio

EMPTY = StreamOutput("")


def result(
    out: StreamOutput = EMPTY,
    err: StreamOutput = EMPTY,
    *,
    exit_code: int | None = 0,
    signal: str | None = None,
    timed_out: bool = False,
) -> BashResult:
    return BashResult(exit_code, signal, timed_out, False, out, err, timeout_ms=500)


# -- rendering -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "rendered"),
    [
        (result(StreamOutput("hi\n")), "hi\n"),
        (result(StreamOutput("hi")), "hi"),
        (result(), "(no output)"),
        (result(exit_code=2), "(no output)\n[exit code: 2]"),
        (
            result(StreamOutput("a"), StreamOutput("b\n"), exit_code=1),
            "a\n[stderr]\nb\n[exit code: 1]",
        ),
        (result(err=StreamOutput("oops")), "[stderr]\noops"),
        (
            result(StreamOutput("tail", truncated=True, spill_path="/t/out.log")),
            "tail\n[output truncated; full output: /t/out.log]",
        ),
        (
            result(StreamOutput("tail\n", truncated=True)),
            "tail\n[output truncated; full output: (unavailable)]",
        ),
        (
            result(err=StreamOutput("e", truncated=True, spill_path="/t/err.log")),
            "[stderr]\ne\n[stderr truncated; full stderr: /t/err.log]",
        ),
        (
            result(err=StreamOutput("e", truncated=True)),
            "[stderr]\ne\n[stderr truncated; full stderr: (unavailable)]",
        ),
        (
            result(StreamOutput("x\n"), exit_code=None, signal="SIGTERM", timed_out=True),
            "x\n[timed out after 500ms]\n[killed by signal: SIGTERM]",
        ),
        (result(exit_code=0, timed_out=True), "(no output)\n[timed out after 500ms]"),
        (result(exit_code=None, signal="SIGKILL"), "(no output)\n[killed by signal: SIGKILL]"),
    ],
)
def test_render_order_and_markers(given: BashResult, rendered: str) -> None:
    assert render_result(given) == rendered


# -- through tools.execute -------------------------------------------------------------------


async def bash(root: Context, **arguments: Any) -> ToolResult:
    outcome: ToolResult = await root.tools.execute("bash", arguments, ToolCall("c1"))
    return outcome


async def test_output_and_a_non_zero_exit_are_not_an_error() -> None:
    async with bash_support.tool_runtime() as root:
        await root.plugin(ToolBash)
        done = await bash(root, command="echo out; echo err >&2; exit 4", description="x")
    assert (done.content, done.is_error, done.code) == (
        "out\n[stderr]\nerr\n[exit code: 4]",
        False,
        None,
    )


async def test_a_timeout_renders_its_markers() -> None:
    async with bash_support.tool_runtime(kill_grace_ms=200) as root:
        await root.plugin(ToolBash)
        done = await bash(root, command="echo start; sleep 100", timeout_ms=200)
    assert done.content == "start\n[timed out after 200ms]\n[killed by signal: SIGTERM]"
    assert not done.is_error


@pytest.mark.parametrize(
    ("arguments", "content"),
    [
        ({"command": ""}, "Error: invalid command: expected a non-empty string"),
        ({"command": "   "}, "Error: invalid command: expected a non-empty string"),
        ({"command": "ls", "timeout_ms": 600_001}, "Error: invalid timeout_ms: at most 600000"),
        (
            {"command": "ls", "timeout_ms": -5},
            "Error: invalid timeout_ms: expected a positive number of milliseconds, got -5",
        ),
        (
            {"command": "ls", "timeout_ms": 0},
            "Error: invalid timeout_ms: expected a positive number of milliseconds, got 0",
        ),
    ],
)
async def test_bad_arguments(arguments: dict[str, Any], content: str) -> None:
    async with bash_support.tool_runtime() as root:
        await root.plugin(ToolBash)
        done = await bash(root, **arguments)
    assert (done.content, done.is_error, done.code) == (content, True, "INVALID_ARGS")


async def test_unknown_and_missing_arguments() -> None:
    async with bash_support.tool_runtime() as root:
        await root.plugin(ToolBash)
        missing = await root.tools.execute("bash", "{}")
        extra = await bash(root, command="ls", cwd="/")
    assert missing.content == "invalid arguments: command: Field required"
    assert extra.content == (
        'invalid arguments: unknown argument "cwd" (bash takes: command, description, '
        "timeout_ms, workdir)"
    )


async def test_a_missing_workdir_is_a_spawn_failure(tmp_path: Path) -> None:
    async with bash_support.tool_runtime() as root:
        await root.plugin(ToolBash)
        done = await bash(root, command="true", workdir=str(tmp_path / "gone"))
    assert done.is_error
    assert done.code == "BASH_SPAWN_FAILED"
    assert done.content.startswith(f'Error: cannot start bash: the working directory "{tmp_path}')


async def test_without_an_executor_the_tool_says_so() -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Bash)
        fiber = await root.plugin(ToolBash)  # injects the seam only: it loads
        assert fiber.state.name == "ACTIVE"
        done = await bash(root, command="ls")
    assert (done.is_error, done.code) == (True, "BASH_NO_EXECUTOR")
    assert done.content == (
        "Error: no bash executor is set: load one (bash-local) next to the bash plugin"
    )


async def test_workdir_is_relative_to_the_process_cwd_without_an_agent(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    async with bash_support.tool_runtime() as root:
        await root.plugin(ToolBash)
        here = await bash(root, command="pwd")
        absolute = await bash(root, command="pwd", workdir=str(tmp_path / "sub"))
    assert here.content == f"{os.getcwd()}\n"
    assert absolute.content == f"{tmp_path / 'sub'}\n"


async def test_workdir_and_session_id_come_from_the_calling_agent(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    calls = tool_calls(
        tool_call("bash", {"command": "pwd"}),
        tool_call("bash", {"command": "pwd", "workdir": "sub"}),
        tool_call("bash", {"command": 'echo "$DSH_SESSION_ID"'}),
    )
    core = {"agents": [{"id": "main", "cwd": str(tmp_path)}]}
    async with bash_support.agent_shell(calls, "done", core=core, plugins=((ToolBash, None),)) as (
        root,
        _,
    ):
        agent = bash_support.main_agent(root)
        assert await run_turn(agent, "go") == {"kind": "completed"}
        results = [r["content"] for r in event_data(agent.session, "tool/result")]
    assert results == [f"{tmp_path}\n", f"{tmp_path / 'sub'}\n", f"{agent.session.id}\n"]


# -- background jobs in the schema -----------------------------------------------------------


async def schema(root: Context) -> dict[str, Any]:
    """The bash tool's parameters as the model sees them, with its description."""
    assembly = await root.system_prompt.assemble()
    (tool,) = [t for t in assembly.tools if t.name == "bash"]
    assert "description" not in tool.parameters  # no docstring leaks to the model
    return {"tool_description": tool.description, **tool.parameters}


async def test_run_in_background_shows_only_while_jobs_are_loaded() -> None:
    async with bash_support.tool_runtime() as root:
        fiber = await root.plugin(ToolBash)
        plain = await schema(root)
        assert "run_in_background" not in plain["properties"]
        assert plain["tool_description"].startswith(DESCRIPTION)
        assert "Background jobs are not available here" in plain["tool_description"]
        jobs = await root.plugin(Jobs)
        await fiber
        offered = await schema(root)
        assert offered["properties"]["run_in_background"]["type"] == "boolean"
        assert "run_in_background" in offered["tool_description"]
        await jobs.dispose()
        await fiber
        assert "run_in_background" not in (await schema(root))["properties"]


async def test_run_in_background_disabled_by_config() -> None:
    async with bash_support.tool_runtime() as root:
        await root.plugin(Jobs)
        await root.plugin(ToolBash, {"enable_run_in_background": False})
        assert "run_in_background" not in (await schema(root))["properties"]
        done = await bash(root, command="sleep 1", run_in_background=True)
    assert (done.is_error, done.code) == (True, "INVALID_ARGS")
    assert done.content == (
        "Error: run_in_background is disabled for this deployment "
        "(tool-bash config enable_run_in_background: false)"
    )


async def test_run_in_background_without_jobs() -> None:
    async with bash_support.tool_runtime() as root:
        await root.plugin(ToolBash)
        done = await bash(root, command="sleep 1", run_in_background=True)
    assert (done.is_error, done.code) == (True, "INVALID_ARGS")
    assert done.content == (
        "Error: run_in_background is unavailable: load the jobs plugin (and tool-jobs)"
    )


async def test_a_background_call_renders_the_job_id() -> None:
    async with bash_support.tool_runtime() as root:
        await root.plugin(Jobs)
        await root.plugin(ToolBash)
        done = await bash(root, command="echo hi", run_in_background=True, timeout_ms=10)
        job = root.jobs.get("j1")
        await job.wait()
    assert (done.content, done.is_error) == ("started background job j1", False)
    assert job.status == "exited 0"


# -- approval --------------------------------------------------------------------------------


async def test_a_declined_command_does_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    async with bash_support.tool_runtime() as root:
        await root.plugin(Approval, {"policy": "deny"})
        await root.plugin(ToolBash)
        done = await bash(root, command=f"touch {marker}")
    assert (done.is_error, done.code) == (True, "APPROVAL_DENIED")
    assert done.content == f"Error: refused by the approval policy (deny): bash: touch {marker}"
    assert not marker.exists()


async def test_the_question_names_the_command() -> None:
    asked: list[ApprovalRequest] = []

    def yes(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    long = "echo " + "x" * 200
    async with bash_support.tool_runtime() as root:
        await root.plugin(Approval, {"policy": "ask"})
        root.approval.set_responder(yes)
        await root.plugin(ToolBash)
        first = await bash(root, command="echo ok")
        await bash(root, command=long)
        await bash(root, command="  echo one\necho two")
    assert first.content == "ok\n"
    assert [(r.kind, r.title) for r in asked] == [
        ("bash", "bash: echo ok"),
        ("bash", "bash: " + long[:119] + "…"),
        ("bash", "bash: echo one…"),
    ]
    assert asked[0].detail == "echo ok"
    assert isinstance(asked[0].call, ToolCall)


# -- ownership, cancellation, disposal -------------------------------------------------------


async def test_unloading_the_tool_removes_its_section_and_schema() -> None:
    async with bash_support.tool_runtime() as root:
        persona_before = render_prompt(await root.system_prompt.assemble())
        tools_before = dict(root.tools._global.tools)
        sections_before = dict(root.system_prompt._global.sections)
        fiber = await root.plugin(ToolBash)
        assembly = await root.system_prompt.assemble()
        assert [(s.name, s.order) for s in assembly.sections if s.name == "tool:bash"] == [
            ("tool:bash", 105)
        ]
        assert GUIDANCE in render_prompt(assembly)
        assert [t.name for t in assembly.tools] == ["bash"]
        await fiber.dispose()
        after = await root.system_prompt.assemble()
        assert render_prompt(after) == persona_before
        assert after.tools == []
        assert root.tools._global.tools == tools_before
        assert root.system_prompt._global.sections == sections_before


async def test_cancelling_the_turn_kills_the_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    fifo = bash_support.make_fifo(tmp_path)
    command = f"sleep 100 & echo $! > {pid_file}; echo up > {fifo}; wait"
    calls = tool_calls(tool_call("bash", {"command": command}))
    async with bash_support.agent_shell(calls, kill_grace_ms=200, plugins=((ToolBash, None),)) as (
        root,
        _,
    ):
        agent = bash_support.main_agent(root)
        agent.send("go")
        assert await bash_support.read_fifo(fifo) == "up\n"
        agent.cancel()
        await agent.when_idle()
        (outcome,) = event_data(agent.session, "tool/result")
        assert agent.session.turn_end(1) == {"kind": "aborted", "reason": "user"}
    assert (outcome["content"], outcome["code"]) == ("Error: tool call aborted", "ABORTED")
    await bash_support.dies(bash_support.read_pid(pid_file))


async def test_the_model_reads_the_result_of_a_command() -> None:
    calls = tool_calls(tool_call("bash", {"command": "printf CLI_TOOL_ROUND_TRIP"}))

    def answer(request: Any) -> list[Any]:
        return text(f"It printed {request.messages[-1].content[0].content}.")

    async with bash_support.agent_shell(calls, answer, plugins=((ToolBash, None),)) as (
        root,
        model,
    ):
        assert await run_turn(bash_support.main_agent(root), "run it") == {"kind": "completed"}
    assert model.requests[0].tools[0].name == "bash"
    assert "tool:bash" not in (model.requests[0].system or "")
    assert GUIDANCE in (model.requests[0].system or "")


async def test_a_bad_config_fails_the_plugin_and_registers_nothing() -> None:
    async with bash_support.tool_runtime() as root:
        with pytest.raises(ConfigError, match=r"\(at enable_background\)"):
            await root.plugin(ToolBash, {"enable_background": True})
        assert root.tools._global.tools == {}
        assert "tool:bash" not in root.system_prompt._global.sections
