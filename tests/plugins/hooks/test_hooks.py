"""The ``hooks`` plugin on a real runtime with a scripted model and real hook scripts
(bash and Python): every decision path of every event, failures, the timeout,
parallel runs, dedupe and disposal."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel

from dsh import ConfigError, Context
from dsh.testing import ScriptedModel, capture_logs, run_turn, text, tool_call, tool_calls
from dsh_agent import HookDecision
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent
from dsh_approval import Approval, ApprovalRequest
from dsh_hooks import Hooks
from dsh_tools import Tool, ToolCall
from tests.plugins.hooks.hook_support import python_hook, records, shell_hook
from tests.support import AgentRig

pytestmark = pytest.mark.anyio

COMPLETED = {"kind": "completed"}


class BashArgs(BaseModel):
    command: str
    description: str | None = None
    timeout_ms: int | None = None


@dataclass
class Rig(AgentRig):
    folder: Path
    ran: list[dict[str, Any]] = field(default_factory=list)
    asked: list[ApprovalRequest] = field(default_factory=list)
    answer: bool = True
    fiber: Any = None  # the hooks plugin's


def hooks(event: str, *commands: str, matcher: str = "", timeout: float | None = None) -> Any:
    entry: dict[str, Any] = {"matcher": matcher, "hooks": []}
    for command in commands:
        hook: dict[str, Any] = {"type": "command", "command": command}
        if timeout is not None:
            hook["timeout"] = timeout
        entry["hooks"].append(hook)
    return {event: [entry]}


@asynccontextmanager
async def rig(
    folder: Path,
    config: dict[str, Any],
    *,
    ask: bool = False,
    early: Any = None,
    late: Any = None,
) -> AsyncIterator[Rig]:
    """agent-core (agent ``main``, model ``m``), a ``bash`` tool that records what it
    ran with (asking the approval service first when ``ask``), ``approval`` answered by
    ``Rig.answer``, and ``hooks`` with ``config`` (no settings files; the project is
    ``folder``), between the ``tool/before`` listeners ``early`` and ``late`` when
    given."""
    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        await root.plugin(AgentCore, {"model": "m"})
        model = ScriptedModel(models=["m"])
        model.install(root)
        state = Rig(root, model, cast("LoopAgent", root.agents.get("main")), folder)

        async def bash(args: BashArgs, call: ToolCall) -> str:
            if ask:
                await root.approval.require(ApprovalRequest("bash", args.command, call=call))
            state.ran.append(args.model_dump(exclude_none=True))
            return f"ran {args.command}"

        root.tools.register(Tool(name="bash", description="b", parameters=BashArgs, execute=bash))

        def respond(request: ApprovalRequest) -> bool:
            state.asked.append(request)
            return state.answer

        root.approval.set_responder(respond)
        if early is not None:
            root.on("tool/before", early)
        state.fiber = root.plugin(
            Hooks, {"claude_settings": False, "project_dir": str(folder), **config}
        )
        await state.fiber
        if late is not None:
            root.on("tool/before", late)
        yield state


def one_bash(command: str = "ls") -> Any:
    return tool_calls(
        tool_call("bash", {"command": command, "description": "list", "timeout_ms": 5}, id="c1")
    )


def python_answer(tmp_path: Path, name: str, answer: Any, code: int = 0) -> str:
    return python_hook(tmp_path, name, f"print(json.dumps({answer!r}))\nsys.exit({code})")


# -- PreToolUse -------------------------------------------------------------------------------


async def test_pre_tool_use_gets_claude_codes_fields_and_environment(tmp_path: Path) -> None:
    guard = shell_hook(tmp_path, "guard", "exit 0")
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", guard, matcher="Bash")}) as r:
        r.model.reply(one_bash(), text("done"))
        assert await run_turn(r.agent, "go") == COMPLETED
        session = r.agent.session.id
        [seen] = records(tmp_path, "guard")
        assert seen == {
            "session_id": session,
            "transcript_path": None,
            "cwd": r.agent.cwd or str(tmp_path),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls", "description": "list", "timeout": 5},
            "tool_use_id": "c1",
        }
        env = (tmp_path / "guard.log.env").read_text().split()
        assert env == [str(tmp_path), str(tmp_path), session]
        assert r.ran == [{"command": "ls", "description": "list", "timeout_ms": 5}]


async def test_a_matcher_that_does_not_match_runs_no_hook(tmp_path: Path) -> None:
    guard = shell_hook(tmp_path, "guard", "exit 2")
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", guard, matcher="Edit|Write")}) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert records(tmp_path, "guard") == []
        assert len(r.ran) == 1


@pytest.mark.parametrize(
    ("answer", "code", "reason"),
    [
        (
            {
                "hookSpecificOutput": {
                    "permissionDecision": "deny",
                    "permissionDecisionReason": "no",
                }
            },
            0,
            "no",
        ),
        ({"hookSpecificOutput": {"permissionDecision": "deny"}}, 0, "denied by a PreToolUse hook"),
        ({"decision": "block", "reason": "blocked"}, 0, "blocked"),
    ],
)
async def test_a_json_deny_blocks_the_call(
    tmp_path: Path, answer: Any, code: int, reason: str
) -> None:
    guard = python_answer(tmp_path, "guard", answer, code)
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", guard)}) as r:
        r.model.reply(one_bash(), text("done"))
        assert await run_turn(r.agent, "go") == COMPLETED
        assert r.ran == []
        assert r.result()["content"] == f"Error: blocked by a hook: {reason}"
        assert r.result()["code"] == "HOOK_DENIED"


async def test_exit_2_blocks_the_call_with_stderr_for_the_model(tmp_path: Path) -> None:
    guard = shell_hook(tmp_path, "guard", 'echo "rm -rf is not allowed" >&2; exit 2')
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", guard)}) as r:
        r.model.reply(one_bash("rm -rf /"), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == []
        assert r.result()["content"] == "Error: blocked by a hook: rm -rf is not allowed"


async def test_deny_wins_over_allow_and_context_joins_the_reason(tmp_path: Path) -> None:
    allow = python_answer(
        tmp_path, "allow", {"hookSpecificOutput": {"permissionDecision": "allow"}}
    )
    deny = python_answer(
        tmp_path,
        "deny",
        {
            "hookSpecificOutput": {
                "permissionDecision": "deny",
                "permissionDecisionReason": "no",
                "additionalContext": "see policy.md",
            }
        },
    )
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", allow, deny)}) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert r.result()["content"] == "Error: blocked by a hook: no\nsee policy.md"


async def test_hooks_answer_before_a_listener_loaded_earlier(tmp_path: Path) -> None:
    guard = shell_hook(tmp_path, "guard", "echo 'no' >&2; exit 2")
    allowed: list[str] = []

    def allow_rule(call: ToolCall) -> HookDecision:  # pragma: no cover - the hook answers
        allowed.append(call.name)
        return HookDecision("allow")

    async with rig(tmp_path, {"hooks": hooks("PreToolUse", guard)}, early=allow_rule) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert r.result()["content"] == "Error: blocked by a hook: no"
        assert allowed == []


async def test_an_allow_and_updated_input_leave_later_listeners_their_say(
    tmp_path: Path,
) -> None:
    rewrite = python_answer(
        tmp_path,
        "rewrite",
        {
            "hookSpecificOutput": {
                "permissionDecision": "allow",
                "updatedInput": {"command": "rm x"},
            }
        },
    )
    seen: list[tuple[dict[str, Any], str | None]] = []

    def deny_rule(call: ToolCall) -> HookDecision:
        seen.append((call.input(), call.permission))
        return HookDecision("deny", "denied by a rule")

    async with rig(tmp_path, {"hooks": hooks("PreToolUse", rewrite)}, late=deny_rule) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert seen == [({"command": "rm x", "description": "list", "timeout_ms": 5}, "allow")]
        assert r.result()["content"] == "Error: blocked by a hook: denied by a rule"
        assert r.ran == []


@pytest.mark.parametrize("answer", [True, False])
async def test_ask_asks_the_approval_service(tmp_path: Path, answer: bool) -> None:
    ask = python_answer(
        tmp_path,
        "ask",
        {"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "sure?"}},
    )
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", ask)}) as r:
        r.answer = answer
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        [request] = r.asked
        assert request.detail == "sure?"
        assert len(r.ran) == (1 if answer else 0)
        if not answer:
            assert r.result()["code"] == "APPROVAL_DENIED"


async def test_ask_wins_over_allow(tmp_path: Path) -> None:
    allow = python_answer(tmp_path, "allow", {"decision": "approve"})
    ask = python_answer(tmp_path, "ask", {"hookSpecificOutput": {"permissionDecision": "ask"}})
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", allow, ask)}) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert len(r.asked) == 1


async def test_allow_approves_the_tools_own_questions(tmp_path: Path) -> None:
    allow = python_answer(
        tmp_path, "allow", {"hookSpecificOutput": {"permissionDecision": "allow"}}
    )
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", allow)}, ask=True) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert r.asked == []
        assert len(r.ran) == 1


async def test_updated_input_replaces_the_fields_it_names(tmp_path: Path) -> None:
    rewrite = python_hook(
        tmp_path,
        "rewrite",
        "tool_input = data['tool_input']\n"
        "tool_input['command'] = tool_input['command'] + ' -la'\n"
        "tool_input['timeout'] = 9\n"
        "print(json.dumps({'hookSpecificOutput': {'permissionDecision': 'allow',"
        " 'updatedInput': tool_input}}))",
    )
    narrow = python_answer(
        tmp_path, "narrow", {"hookSpecificOutput": {"updatedInput": {"description": "d"}}}
    )
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", rewrite, narrow)}, ask=True) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == [{"command": "ls -la", "description": "d", "timeout_ms": 9}]
        assert r.asked == []  # the allow came with it


async def test_updated_input_alone_changes_the_call_and_asks_as_usual(tmp_path: Path) -> None:
    narrow = python_answer(
        tmp_path, "narrow", {"hookSpecificOutput": {"updatedInput": {"command": "pwd"}}}
    )
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", narrow)}, ask=True) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == [{"command": "pwd", "description": "list", "timeout_ms": 5}]
        assert len(r.asked) == 1


async def test_pre_tool_use_context_is_added_to_the_result(tmp_path: Path) -> None:
    note = python_answer(
        tmp_path, "note", {"hookSpecificOutput": {"additionalContext": "mind the cwd"}}
    )
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", note)}) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert r.result()["content"] == "ran ls\n\nmind the cwd"


async def test_context_of_a_call_a_later_listener_refuses_is_dropped(tmp_path: Path) -> None:
    note = python_answer(
        tmp_path, "note", {"hookSpecificOutput": {"additionalContext": "mind the cwd"}}
    )
    refuse = lambda call: HookDecision("deny", "by a rule")  # noqa: E731
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", note)}, late=refuse) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert r.result()["content"] == "Error: blocked by a hook: by a rule"
        gc.collect()
        assert r.fiber.instance._call_context == {}


async def test_continue_false_denies_the_call_and_stops_the_turn(tmp_path: Path) -> None:
    stop = python_answer(tmp_path, "stop", {"continue": False, "stopReason": "halt"})
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", stop)}) as r:
        r.model.reply(one_bash(), text("never"))
        with capture_logs("dsh.hooks") as logs:
            end = await run_turn(r.agent, "go")
        assert end is not None
        assert end["kind"] == "aborted"
        assert r.ran == []
        assert "PreToolUse: a hook stopped the turn: halt" in logs.messages(logging.WARNING)
        assert len(r.model.requests) == 1


@pytest.mark.parametrize("body", ["echo broken >&2; exit 1", "kill -SEGV $$"])
async def test_a_failing_or_crashing_hook_is_a_warning_and_the_call_runs(
    tmp_path: Path, body: str
) -> None:
    guard = shell_hook(tmp_path, "guard", body)
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", guard)}) as r:
        r.model.reply(one_bash(), text("done"))
        with capture_logs("dsh.hooks") as logs:
            await run_turn(r.agent, "go")
        assert len(r.ran) == 1
        [warning] = logs.messages(logging.WARNING)
        assert warning.startswith(f"PreToolUse: hook {guard!r} failed with exit status ")


async def test_a_hanging_hook_times_out_and_the_call_runs(tmp_path: Path) -> None:
    guard = shell_hook(tmp_path, "guard", "exec sleep 1000")
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", guard, timeout=0.3)}) as r:
        r.model.reply(one_bash(), text("done"))
        with capture_logs("dsh.hooks") as logs:
            await run_turn(r.agent, "go")
        assert len(r.ran) == 1
        assert logs.messages(logging.WARNING) == [
            f"PreToolUse: hook {guard!r} timed out after 0.3 s"
        ]


async def test_hooks_of_one_event_run_in_parallel_and_identical_ones_once(
    tmp_path: Path,
) -> None:
    # Each waits (bounded) for the other's flag: run one after the other, both time out.
    def waiting(me: str, other: str) -> str:
        return shell_hook(
            tmp_path,
            me,
            f'touch "{tmp_path}/{me}.flag"\n'
            f'for _ in $(seq 500); do [ -e "{tmp_path}/{other}.flag" ] && exit 0\n'
            "sleep 0.01; done\n"
            "exit 1",
        )

    a, b = waiting("a", "b"), waiting("b", "a")
    config = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"command": a}, {"command": b}]},
                {"matcher": "*", "hooks": [{"command": a}]},
            ]
        }
    }
    async with rig(tmp_path, config) as r:
        r.model.reply(one_bash(), text("done"))
        with capture_logs("dsh.hooks") as logs:
            await run_turn(r.agent, "go")
        assert logs.messages(logging.WARNING) == []
        assert len(records(tmp_path, "a")) == 1
        assert len(records(tmp_path, "b")) == 1


# -- PostToolUse ------------------------------------------------------------------------------


async def test_post_tool_use_sees_the_response_and_adds_to_it(tmp_path: Path) -> None:
    format_ = python_answer(
        tmp_path,
        "format",
        {
            "decision": "block",
            "reason": "lint failed",
            "hookSpecificOutput": {"additionalContext": "formatted"},
        },
    )
    exit2 = shell_hook(tmp_path, "exit2", "echo also >&2; exit 2")
    async with rig(tmp_path, {"hooks": hooks("PostToolUse", format_, exit2, matcher="Bash")}) as r:
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        [seen] = records(tmp_path, "format")
        assert seen["hook_event_name"] == "PostToolUse"
        assert seen["tool_response"] == {"content": "ran ls", "is_error": False}
        assert seen["tool_input"]["command"] == "ls"
        assert r.result()["content"] == "ran ls\n\nlint failed\nformatted\nalso"


async def test_post_tool_use_sees_an_error_code_and_may_stop(tmp_path: Path) -> None:
    stop = python_answer(tmp_path, "stop", {"continue": False})
    async with rig(tmp_path, {"hooks": hooks("PostToolUse", stop)}) as r:
        r.model.reply(tool_calls(tool_call("bash", {}, id="c1")), text("never"))
        with capture_logs("dsh.hooks") as logs:
            end = await run_turn(r.agent, "go")
        [seen] = records(tmp_path, "stop")
        assert seen["tool_response"]["code"] == "INVALID_ARGS"
        assert end is not None
        assert end["kind"] == "aborted"
        assert logs.messages(logging.WARNING) == [
            "PostToolUse: a hook stopped the turn: stopped by a hook"
        ]


# -- UserPromptSubmit -------------------------------------------------------------------------


async def test_user_prompt_submit_plain_stdout_and_context_reach_the_model(
    tmp_path: Path,
) -> None:
    plain = shell_hook(tmp_path, "plain", "echo 'branch: main'")
    json_ = python_answer(
        tmp_path, "ctx", {"hookSpecificOutput": {"additionalContext": "tests pass"}}
    )
    async with rig(tmp_path, {"hooks": hooks("UserPromptSubmit", plain, json_)}) as r:
        r.model.reply(text("done"))
        assert await run_turn(r.agent, "hello") == COMPLETED
        assert records(tmp_path, "plain")[0]["prompt"] == "hello"
        assert r.sent(0) == ["hello", "branch: main\ntests pass"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("echo 'no secrets' >&2; exit 2", "no secrets"),
        ("""echo '{"decision": "block", "reason": "policy"}'""", "policy"),
        ("""echo '{"continue": false, "stopReason": "later"}'""", "later"),
    ],
)
async def test_a_blocked_prompt_is_dropped_with_the_reason(
    tmp_path: Path, body: str, reason: str
) -> None:
    guard = shell_hook(tmp_path, "guard", body)
    async with rig(tmp_path, {"hooks": hooks("UserPromptSubmit", guard)}) as r:
        end = await run_turn(r.agent, "my password is hunter2")
        assert end == {"kind": "blocked", "message": reason}
        assert r.model.requests == []


# -- Stop -------------------------------------------------------------------------------------


async def test_stop_exit_2_keeps_the_turn_going_once(tmp_path: Path) -> None:
    check = python_hook(
        tmp_path,
        "check",
        "if not data['stop_hook_active']:\n"
        "    sys.stderr.write('run the tests first')\n"
        "    sys.exit(2)",
    )
    async with rig(tmp_path, {"hooks": hooks("Stop", check)}) as r:
        r.model.reply(text("done?"), text("done."))
        assert await run_turn(r.agent, "go") == COMPLETED
        assert [seen["stop_hook_active"] for seen in records(tmp_path, "check")] == [False, True]
        assert r.sent(1)[-1] == "run the tests first"
        assert len(r.model.requests) == 2
        # The next turn starts afresh.
        r.model.reply(text("a"), text("b"))
        await run_turn(r.agent, "again")
        assert records(tmp_path, "check")[2]["stop_hook_active"] is False


async def test_stop_continue_false_ends_the_turn_whatever_the_others_say(
    tmp_path: Path,
) -> None:
    block = python_answer(tmp_path, "block", {"decision": "block", "reason": "more"})
    stop = python_answer(tmp_path, "stop", {"continue": False, "stopReason": "enough"})
    async with rig(tmp_path, {"hooks": hooks("Stop", block, stop)}) as r:
        r.model.reply(text("done"))
        assert await run_turn(r.agent, "go") == COMPLETED
        assert len(r.model.requests) == 1


async def test_a_stop_hook_that_says_nothing_lets_the_turn_end(tmp_path: Path) -> None:
    quiet = shell_hook(tmp_path, "quiet", "exit 0")
    async with rig(tmp_path, {"hooks": hooks("Stop", quiet)}) as r:
        r.model.reply(text("done"))
        assert await run_turn(r.agent, "go") == COMPLETED
        assert len(records(tmp_path, "quiet")) == 1


# -- SessionStart / SessionEnd ----------------------------------------------------------------


async def test_session_start_context_joins_the_first_prompt(tmp_path: Path) -> None:
    start = shell_hook(tmp_path, "start", "echo 'recent commits: abc'")
    resume = shell_hook(tmp_path, "resume", "echo never")
    config = {
        "hooks": {
            "SessionStart": [
                {"matcher": "startup", "hooks": [{"command": start}]},
                {"matcher": "resume", "hooks": [{"command": resume}]},
            ]
        }
    }
    async with rig(tmp_path, config) as r:
        r.model.reply(text("one"), text("two"))
        await run_turn(r.agent, "hello")
        await run_turn(r.agent, "again")
        assert records(tmp_path, "start")[0]["source"] == "startup"
        assert records(tmp_path, "resume") == []
        assert r.sent(0) == ["hello", "recent commits: abc"]
        assert r.sent(1)[-1] == "again"


async def test_a_session_started_again_after_its_end_is_a_resume(tmp_path: Path) -> None:
    resume = shell_hook(tmp_path, "resume", "echo 'welcome back'")
    config = {"hooks": hooks("SessionStart", resume, matcher="resume")}
    async with rig(tmp_path, config) as r:
        r.model.reply(text("one"), text("two"))
        await run_turn(r.agent, "hello")
        assert records(tmp_path, "resume") == []  # a new session starts up
        await r.agent.end_session()
        await run_turn(r.agent, "again")
        assert records(tmp_path, "resume")[0]["source"] == "resume"
        assert r.sent(1)[-2:] == ["again", "welcome back"]


async def test_session_start_and_end_failures_only_warn(tmp_path: Path) -> None:
    start = shell_hook(tmp_path, "start", "echo 'cannot block' >&2; exit 2")
    end = python_answer(tmp_path, "end", {"continue": False, "stopReason": "bye"})
    config = {"hooks": {**hooks("SessionStart", start), **hooks("SessionEnd", end)}}
    with capture_logs("dsh.hooks") as logs:
        async with rig(tmp_path, config) as r:
            r.model.reply(text("one"))
            assert await run_turn(r.agent, "hello") == COMPLETED
            assert r.sent(0) == ["hello"]
            await r.agent.dispose()
    assert records(tmp_path, "end")[0]["reason"] == "other"
    assert records(tmp_path, "end")[0]["hook_event_name"] == "SessionEnd"
    assert logs.messages(logging.WARNING) == [
        "SessionStart: cannot block",
        "SessionEnd: a hook stopped the turn: bye",
    ]


# -- loading and unloading --------------------------------------------------------------------


async def test_without_hooks_the_plugin_listens_to_nothing_it_does_not_need(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, {}) as r:
        loop = r.agent._loop
        assert not loop.tool_before.heard(r.agent)
        assert not loop.tool_after.heard(r.agent)
        assert not loop.user_prompt.heard(r.agent)
        assert not loop.turn_stop.heard(r.agent)


async def test_disposed_hooks_no_longer_run(tmp_path: Path) -> None:
    guard = shell_hook(tmp_path, "guard", "exit 2")
    async with rig(tmp_path, {"hooks": hooks("PreToolUse", guard)}) as r:
        await r.fiber.dispose()
        r.model.reply(one_bash(), text("done"))
        await run_turn(r.agent, "go")
        assert records(tmp_path, "guard") == []
        assert len(r.ran) == 1


async def test_an_unknown_event_in_the_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Notification"):
        async with rig(tmp_path, {"hooks": hooks("Notification", "true")}):
            pass  # pragma: no cover - the load fails
