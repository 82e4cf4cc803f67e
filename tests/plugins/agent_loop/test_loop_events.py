"""The loop events of RFC 0036 (ARCHITECTURE §6.14): ``tool/before``, ``tool/after``,
``user/prompt``, ``turn/stop``, ``session/start`` and ``session/end``, with every
decision path, on a real runtime with a scripted model."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import pytest
from pydantic import BaseModel

from dsh import Context, EventBus
from dsh.testing import ScriptedModel, run_turn, text, tool_call, tool_calls
from dsh_agent import HookDecision, HookDecisionError
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent
from dsh_approval import Approval, ApprovalRequest
from dsh_llm import Message
from dsh_session import Session
from dsh_tools import Tool, ToolCall, ToolResult
from tests.support import AgentRig, event_data

pytestmark = pytest.mark.anyio

COMPLETED = {"kind": "completed"}


class Args(BaseModel):
    text: str = ""


@dataclass
class Rig(AgentRig):
    #: What the ``echo`` tool ran with, and the approval questions it and the loop asked.
    ran: list[str] = field(default_factory=list)
    asked: list[ApprovalRequest] = field(default_factory=list)
    answer: bool = True


@asynccontextmanager
async def rig(policy: str | None = None, *, ask: str = "", **config: Any) -> AsyncIterator[Rig]:
    """agent-core with agent ``main`` on model ``m``, an ``echo`` tool that asks the
    approval service ``ask`` (``"plain"``, ``"always"`` or nothing) before it runs, and
    ``approval`` with ``policy`` (not loaded when None) answered by ``Rig.answer``."""
    async with Context() as root:
        if policy is not None:
            await root.plugin(Approval, {"policy": policy})
        await root.plugin(AgentCore, {"model": "m", **config})
        model = ScriptedModel(models=["m"])
        model.install(root)
        state = Rig(root, model, cast("LoopAgent", root.agents.get("main")))

        async def echo(args: Args, call: ToolCall) -> str:
            if ask:
                await root.approval.require(
                    ApprovalRequest(
                        "echo", f"echo {args.text}", call=call, always_ask=ask == "always"
                    )
                )
            state.ran.append(args.text)
            return f"echo: {args.text}"

        root.tools.register(Tool(name="echo", description="echo", parameters=Args, execute=echo))
        if policy is not None:

            def respond(request: ApprovalRequest) -> bool:
                state.asked.append(request)
                return state.answer

            root.approval.set_responder(respond)
        yield state


def one_echo(arguments: Any = None) -> Any:
    return tool_calls(
        tool_call("echo", {"text": "hi"} if arguments is None else arguments, id="c1")
    )


# -- free when nobody listens ----------------------------------------------------------------


async def test_nobody_listening_dispatches_none_of_the_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dispatched: list[str] = []
    bus = EventBus
    serial, parallel = bus.serial, bus.parallel

    async def counting_serial(self: EventBus, name: str, args: Any, scope: object) -> Any:
        dispatched.append(name)
        return await serial(self, name, args, scope)

    async def counting_parallel(self: EventBus, name: str, args: Any, scope: object) -> None:
        dispatched.append(name)
        await parallel(self, name, args, scope)

    monkeypatch.setattr(bus, "serial", counting_serial)
    monkeypatch.setattr(bus, "parallel", counting_parallel)
    async with rig() as r:
        # Another agent's listeners do not make this agent's dispatches happen.
        other = r.root.agents.create("other", model="m")
        for event in ("tool/before", "user/prompt", "turn/stop"):
            other.ctx.on(event, lambda *args: None)
        other.ctx.on("tool/after", lambda call, result: None)
        other.ctx.on("session/start", lambda agent, session: None)
        other.ctx.on("session/end", lambda agent, session: None)
        r.model.reply(one_echo(), text("done"))
        assert await run_turn(r.agent, "go") == COMPLETED
        await r.agent.dispose()
        assert r.ran == ["hi"]
    loop_events = {"tool/before", "user/prompt", "turn/stop", "session/start", "session/end"}
    assert loop_events.isdisjoint(dispatched)


# -- tool/before ------------------------------------------------------------------------------


async def test_tool_before_sees_the_call_and_no_answer_runs_it() -> None:
    async with rig() as r:
        seen: list[tuple[str, str, Any, Any, dict[str, Any]]] = []

        def before(call: ToolCall) -> None:
            seen.append((call.id, call.name, call.arguments, call.agent, call.input()))

        r.agent.ctx.on("tool/before", before)
        r.model.reply(one_echo(), text("done"))
        assert await run_turn(r.agent, "go") == COMPLETED
        assert seen == [("c1", "echo", '{"text": "hi"}', r.agent, {"text": "hi"})]
        assert r.ran == ["hi"]
        assert "arguments" not in r.result()


@pytest.mark.parametrize(("reason", "shown"), [("no rm", "no rm"), ("", "no reason given")])
async def test_a_denied_call_is_not_run_and_reads_blocked_by_a_hook(
    reason: str, shown: str
) -> None:
    async with rig() as r:
        r.agent.ctx.on("tool/before", lambda call: HookDecision("deny", reason))
        r.model.reply(one_echo(), text("done"))
        assert await run_turn(r.agent, "go") == COMPLETED
        assert r.ran == []
        assert r.result() == {
            "turn": 1,
            "step": 1,
            "call_id": "c1",
            "name": "echo",
            "content": f"Error: blocked by a hook: {shown}",
            "is_error": True,
            "code": "HOOK_DENIED",
        }
        [_, tool_message] = r.model.requests[1].messages[1:]
        assert tool_message.content[0].content == f"Error: blocked by a hook: {shown}"


async def test_the_first_answer_wins_and_later_listeners_are_not_called() -> None:
    async with rig() as r:
        calls: list[str] = []

        def silent(call: ToolCall) -> None:
            calls.append("silent")

        async def deny(call: ToolCall) -> HookDecision:
            calls.append("deny")
            return HookDecision("deny", "first")

        def allow(
            call: ToolCall,
        ) -> HookDecision:  # pragma: no cover - never reached: deny answered first
            calls.append("allow")
            return HookDecision("allow")

        for listener in (silent, deny, allow):
            r.agent.ctx.on("tool/before", listener)
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert calls == ["silent", "deny"]
        assert r.result()["content"] == "Error: blocked by a hook: first"


async def test_replaced_arguments_run_and_are_recorded_with_the_result() -> None:
    async with rig() as r:
        r.agent.ctx.on("tool/before", lambda call: HookDecision(arguments={"text": "safe"}))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == ["safe"]
        # The model's call is kept as it wrote it; the result says what ran.
        assert event_data(r.agent.session, "tool/call")[0]["arguments"] == '{"text": "hi"}'
        assert r.result()["arguments"] == {"text": "safe"}
        assert r.result()["content"] == "echo: safe"


async def test_replaced_arguments_are_validated_like_the_models() -> None:
    async with rig() as r:
        r.agent.ctx.on("tool/before", lambda call: HookDecision(arguments={"txt": 1}))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == []
        assert r.result()["code"] == "INVALID_ARGS"


async def test_a_failing_listener_refuses_the_call() -> None:
    async with rig() as r:

        def broken(call: ToolCall) -> None:
            raise RuntimeError("guard crashed")

        r.agent.ctx.on("tool/before", broken)
        r.model.reply(one_echo(), text("done"))
        assert await run_turn(r.agent, "go") == COMPLETED
        assert r.ran == []
        assert r.result()["content"] == (
            "Error: blocked by a hook: a tool/before listener failed: guard crashed"
        )
        assert r.result()["code"] == "HOOK_DENIED"


async def test_a_listener_answering_something_else_refuses_the_call() -> None:
    async with rig() as r:
        r.agent.ctx.on("tool/before", lambda call: "allow")
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == []
        assert r.result()["content"] == (
            "Error: blocked by a hook: a tool/before listener answered str; "
            "it must answer a dsh_agent.HookDecision or None"
        )


async def test_allow_approves_the_tools_own_questions_without_asking() -> None:
    async with rig("ask", ask="plain") as r:
        decided: list[str] = []
        r.root.on("approval/decided", lambda request, approved, by: decided.append(by))
        r.agent.ctx.on("tool/before", lambda call: HookDecision("allow"))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == ["hi"]
        assert r.asked == []
        assert decided == ["hook"]


async def test_allow_still_asks_an_always_ask_question() -> None:
    async with rig("allow", ask="always") as r:
        r.answer = False
        r.agent.ctx.on("tool/before", lambda call: HookDecision("allow"))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert [q.title for q in r.asked] == ["echo hi"]
        assert r.ran == []
        assert r.result()["code"] == "APPROVAL_DENIED"


async def test_without_a_decision_the_tools_questions_are_asked_as_usual() -> None:
    async with rig("ask", ask="plain") as r:
        r.agent.ctx.on("tool/before", lambda call: HookDecision(arguments={"text": "x"}))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert [q.title for q in r.asked] == ["echo x"]


async def test_ask_asks_first_and_a_yes_answers_the_tools_own_questions() -> None:
    async with rig("allow", ask="always") as r:
        r.agent.ctx.on("tool/before", lambda call: HookDecision("ask", "touches the repo"))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        [question] = r.asked
        assert question.kind == "tool"
        assert question.always_ask
        assert question.title == 'echo {"text": "hi"} (touches the repo)'
        assert question.detail == "touches the repo"
        assert isinstance(question.call, ToolCall)
        assert question.call.id == "c1"
        # The tool's own always_ask question was already answered by the user.
        assert r.ran == ["hi"]


async def test_ask_shortens_long_arguments_in_the_title() -> None:
    async with rig("ask") as r:
        r.agent.ctx.on(
            "tool/before", lambda call: HookDecision("ask", arguments={"text": "y" * 300})
        )
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        [question] = r.asked
        assert question.title == "echo " + ('{"text": "' + "y" * 300)[:119] + "…"
        assert r.ran == ["y" * 300]


async def test_ask_declined_is_the_usual_declined_result() -> None:
    async with rig("allow") as r:
        r.answer = False
        r.agent.ctx.on("tool/before", lambda call: HookDecision("ask"))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == []
        assert r.result()["content"] == 'Error: the user declined: echo {"text": "hi"}'
        assert r.result()["code"] == "APPROVAL_DENIED"


async def test_ask_under_policy_deny_is_refused_by_the_policy() -> None:
    async with rig("deny") as r:
        r.agent.ctx.on("tool/before", lambda call: HookDecision("ask"))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert r.asked == []
        assert r.result()["content"] == (
            'Error: refused by the approval policy (deny): echo {"text": "hi"}'
        )


async def test_ask_without_an_approval_service_is_declined() -> None:
    async with rig() as r:
        r.agent.ctx.on("tool/before", lambda call: HookDecision("ask"))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == []
        assert r.result()["code"] == "APPROVAL_DENIED"


async def test_concurrent_calls_each_pass_the_hooks() -> None:
    async with rig() as r:

        def before(call: ToolCall) -> HookDecision | None:
            return HookDecision("deny", "no b") if call.input()["text"] == "b" else None

        r.agent.ctx.on("tool/before", before)
        r.agent.ctx.on("tool/after", lambda call, result: f"after {call.id}")
        calls = [tool_call("echo", {"text": t}, id=f"c-{t}") for t in "abc"]
        r.model.reply(tool_calls(*calls), text("done"))
        await run_turn(r.agent, "go")
        assert sorted(r.ran) == ["a", "c"]
        assert [r.result(i)["content"] for i in range(3)] == [
            "echo: a\n\nafter c-a",
            "Error: blocked by a hook: no b",
            "echo: c\n\nafter c-c",
        ]


async def test_listeners_of_another_agent_do_not_hear_this_one() -> None:
    async with rig() as r:
        other = r.root.agents.create("other", model="m")
        other.ctx.on("tool/before", lambda call: HookDecision("deny", "not mine"))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert r.ran == ["hi"]


async def test_a_global_listener_hears_every_agent() -> None:
    async with rig() as r:
        r.root.on("tool/before", lambda call: HookDecision("deny", f"for {call.agent.id}"))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert r.result()["content"] == "Error: blocked by a hook: for main"


# -- tool/after -------------------------------------------------------------------------------


async def test_tool_after_appends_every_listeners_text_in_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with rig() as r:
        seen: list[tuple[str, ToolResult]] = []

        def first(call: ToolCall, result: ToolResult) -> str:
            seen.append((call.id, result))
            return "formatted"

        async def second(call: ToolCall, result: ToolResult) -> str:
            return "linted"

        def broken(call: ToolCall, result: ToolResult) -> str:
            raise RuntimeError("formatter crashed")

        for listener in (
            first,
            lambda call, result: None,
            lambda call, result: "",
            broken,
            lambda call, result: 42,
            second,
        ):
            r.agent.ctx.on("tool/after", listener)
        r.model.reply(one_echo(), text("done"))
        with caplog.at_level(logging.ERROR, logger="dsh.agent-loop"):
            assert await run_turn(r.agent, "go") == COMPLETED
        assert seen == [("c1", ToolResult("echo: hi"))]
        assert r.result()["content"] == "echo: hi\n\nformatted\n\nlinted"
        assert "a tool/after listener failed for echo" in caplog.text
        assert "a tool/after listener answered int for echo" in caplog.text


async def test_tool_after_hears_error_results_but_not_denied_calls() -> None:
    async with rig() as r:
        heard: list[str | None] = []

        def after(call: ToolCall, result: ToolResult) -> None:
            heard.append(result.code)

        r.agent.ctx.on("tool/after", after)
        r.agent.ctx.on(
            "tool/before",
            lambda call: HookDecision("deny") if call.id == "denied" else None,
        )
        r.model.reply(
            tool_calls(
                tool_call("echo", {"text": 1}, id="bad"), tool_call("echo", {}, id="denied")
            ),
            text("done"),
        )
        await run_turn(r.agent, "go")
        assert heard == ["INVALID_ARGS"]


# -- user/prompt ------------------------------------------------------------------------------


async def test_user_prompt_sees_each_message_and_no_answer_changes_nothing() -> None:
    async with rig() as r:
        seen: list[tuple[LoopAgent, Message]] = []
        r.agent.ctx.on("user/prompt", lambda agent, message: seen.append((agent, message)))
        r.model.reply(text("done"))
        assert await run_turn(r.agent, "hello") == COMPLETED
        assert seen == [(r.agent, Message.user("hello"))]
        assert r.sent(0) == ["hello"]


async def test_a_denied_prompt_is_dropped_and_the_turn_ends_blocked_with_the_reason() -> None:
    async with rig() as r:
        r.agent.ctx.on("user/prompt", lambda agent, message: HookDecision("deny", "no secrets"))
        assert await run_turn(r.agent, "my password is x") == {
            "kind": "blocked",
            "message": "no secrets",
        }
        assert r.model.requests == []
        assert event_data(r.agent.session, "user/message") == []


async def test_a_denied_prompt_without_a_reason_names_the_listener_event() -> None:
    async with rig() as r:
        r.agent.ctx.on("user/prompt", lambda agent, message: HookDecision("deny"))
        assert await run_turn(r.agent, "x") == {
            "kind": "blocked",
            "message": "a user/prompt listener refused the message",
        }


async def test_prompt_context_follows_the_message() -> None:
    async with rig() as r:
        r.agent.ctx.on("user/prompt", lambda agent, message: HookDecision(context="branch: main"))
        r.model.reply(text("done"))
        await run_turn(r.agent, "hello")
        assert r.sent(0) == ["hello", "branch: main"]
        assert len(event_data(r.agent.session, "user/message")) == 2


@pytest.mark.parametrize("decision", ["allow", "ask"])
async def test_allow_and_ask_on_a_prompt_let_it_through(decision: str) -> None:
    async with rig() as r:
        r.agent.ctx.on("user/prompt", lambda agent, message: HookDecision(decision))
        r.model.reply(text("done"))
        assert await run_turn(r.agent, "hello") == COMPLETED
        assert r.sent(0) == ["hello"]


async def test_a_prompt_listener_answering_something_else_fails_the_turn() -> None:
    async with rig() as r:
        r.agent.ctx.on("user/prompt", lambda agent, message: "no")
        reason = await run_turn(r.agent, "hello")
        assert reason == {
            "kind": "error",
            "code": "AGENT_TYPE",
            "message": "a user/prompt listener must answer a dsh_agent.HookDecision or None, "
            "got str",
        }


# -- turn/stop --------------------------------------------------------------------------------


async def test_a_stop_text_runs_another_step_with_it_as_a_user_message() -> None:
    async with rig() as r:
        stops: list[tuple[LoopAgent, int]] = []

        def stop(agent: LoopAgent, turn: int) -> str | None:
            stops.append((agent, turn))
            return "run the tests first" if len(stops) == 1 else None

        r.agent.ctx.on("turn/stop", stop)
        r.model.reply(text("done"), text("tests pass"))
        assert await run_turn(r.agent, "go") == COMPLETED
        assert stops == [(r.agent, 1), (r.agent, 1)]
        assert r.sent(1) == ["go", "run the tests first"]
        assert [m["step"] for m in event_data(r.agent.session, "user/message")] == [1, 2]


async def test_turn_stop_is_not_asked_while_tools_are_called() -> None:
    async with rig() as r:
        steps: list[int] = []
        r.agent.ctx.on("turn/stop", lambda agent, turn: steps.append(agent._step))
        r.model.reply(one_echo(), text("done"))
        await run_turn(r.agent, "go")
        assert steps == [2]


async def test_a_stop_listener_that_never_lets_go_ends_at_max_steps() -> None:
    async with rig(max_steps=3) as r:
        r.agent.ctx.on("turn/stop", lambda agent, turn: "keep going")
        r.model.reply(text("a"), text("b"), text("c"))
        assert await run_turn(r.agent, "go") == {
            "kind": "error",
            "code": "MAX_STEPS",
            "message": "the turn reached its limit of 3 steps",
        }
        assert len(r.model.requests) == 3


async def test_an_empty_stop_text_lets_the_turn_end() -> None:
    async with rig() as r:
        r.agent.ctx.on("turn/stop", lambda agent, turn: "")
        r.model.reply(text("done", finish="max-tokens"))
        assert await run_turn(r.agent, "go") == {"kind": "max-tokens"}


async def test_a_stop_listener_answering_something_else_fails_the_turn() -> None:
    async with rig() as r:
        r.agent.ctx.on("turn/stop", lambda agent, turn: True)
        r.model.reply(text("done"))
        reason = await run_turn(r.agent, "go")
        assert reason is not None
        assert reason["code"] == "AGENT_TYPE"
        assert reason["message"] == "a turn/stop listener must answer a str or None, got bool"


# -- session/start, session/end ----------------------------------------------------------------


async def test_session_start_before_the_first_turn_and_end_when_the_agent_goes() -> None:
    heard: list[tuple[str, str, Session, int]] = []
    async with rig() as r:
        agent = r.agent

        async def start(agent: LoopAgent, session: Session) -> None:
            heard.append(("start", agent.id, session, session.last_turn()))

        def end(agent: LoopAgent, session: Session) -> None:
            heard.append(("end", agent.id, session, session.last_turn()))

        r.root.on("session/start", start)
        r.root.on("session/end", end)
        r.model.reply(text("one"), text("two"))
        await run_turn(agent, "one")
        await run_turn(agent, "two")
        assert heard == [("start", "main", agent.session, 0)]
        await agent.dispose()
        assert heard[1:] == [("end", "main", agent.session, 2)]


async def test_the_agent_is_running_while_session_start_is_heard() -> None:
    async with rig() as r:
        statuses: list[str] = []

        async def start(agent: LoopAgent, session: Session) -> None:
            await anyio.lowlevel.checkpoint()
            statuses.append(agent.status)

        r.root.on("session/start", start)
        r.model.reply(text("one"))
        # So when_idle, called while the listener runs, waits for the turn too.
        assert await run_turn(r.agent, "one") == COMPLETED
        assert statuses == ["running"]


async def test_session_start_tells_a_resumed_session_by_its_turns() -> None:
    async with rig() as r:
        r.model.reply(text("one"), text("two"))
        await run_turn(r.agent, "one")
        session = r.agent.session
        turns: list[int] = []
        r.root.on("session/start", lambda agent, session: turns.append(session.last_turn()))
        await r.agent.dispose()
        resumed = r.root.agents.create("again", model="m", session=session)
        await run_turn(resumed, "two")
        assert turns == [1]


async def test_end_session_ends_it_once_and_the_next_turn_starts_another() -> None:
    async with rig() as r:
        heard: list[str] = []
        r.root.on("session/start", lambda agent, session: heard.append("start"))
        r.root.on("session/end", lambda agent, session: heard.append("end"))
        r.model.reply(text("one"), text("two"))
        await r.agent.end_session()  # nothing started: a no-op
        await run_turn(r.agent, "one")
        await r.agent.end_session()
        await r.agent.end_session()
        assert heard == ["start", "end"]
        await run_turn(r.agent, "two")
        await r.agent.dispose()
        assert heard == ["start", "end", "start", "end"]


async def test_a_session_started_unheard_still_ends_for_a_later_listener() -> None:
    async with rig() as r:
        ended: list[str] = []
        r.model.reply(text("one"))
        await run_turn(r.agent, "one")
        r.root.on("session/end", lambda agent, session: ended.append(agent.id))
        await r.agent.dispose()
        assert ended == ["main"]


async def test_session_end_listener_can_await_while_the_agent_is_disposed() -> None:
    async with rig() as r:
        waited = anyio.Event()

        async def end(agent: LoopAgent, session: Session) -> None:
            await anyio.lowlevel.checkpoint()
            waited.set()

        r.root.on("session/end", end)
        r.model.reply(text("one"))
        await run_turn(r.agent, "one")
        await r.agent.dispose()
        assert waited.is_set()


async def test_failing_session_listeners_are_logged_and_the_agent_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(agent: LoopAgent, session: Session) -> None:
        raise RuntimeError("hook crashed")

    with caplog.at_level(logging.ERROR, logger="dsh.agent-loop"):
        async with rig() as r:
            r.root.on("session/start", broken)
            r.root.on("session/end", broken)
            r.model.reply(text("one"))
            assert await run_turn(r.agent, "one") == COMPLETED
            await r.agent.dispose()
    assert "a listener of session/start failed for agent 'main'" in caplog.text
    assert "a listener of session/end failed for agent 'main'" in caplog.text


async def test_an_agent_that_never_ran_has_no_session_events() -> None:
    heard: list[str] = []
    async with rig() as r:
        r.root.on("session/start", lambda agent, session: heard.append("start"))
        r.root.on("session/end", lambda agent, session: heard.append("end"))
        await r.agent.dispose()
    assert heard == []


# -- the types --------------------------------------------------------------------------------


def test_hook_decision_defaults_and_checks() -> None:
    assert HookDecision() == HookDecision(None, "", None, "")
    with pytest.raises(
        HookDecisionError, match="decision must be one of allow, deny, ask or None, got 'yes'"
    ):
        HookDecision("yes")
    with pytest.raises(HookDecisionError, match=r"HookDecision\.reason must be a str, got int"):
        HookDecision("deny", 1)  # type: ignore[arg-type]
    with pytest.raises(
        HookDecisionError, match=r"HookDecision\.context must be a str, got NoneType"
    ):
        HookDecision(context=None)  # type: ignore[arg-type]
    with pytest.raises(HookDecisionError, match=r"arguments must be a mapping .*, got list"):
        HookDecision(arguments=[1])  # type: ignore[arg-type]
    assert HookDecisionError.code == "HOOK_DECISION"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        ("  ", {}),
        ("not json", {}),
        ("[1]", {}),
        ({"b": 2}, {"b": 2}),
    ],
)
def test_tool_call_input(arguments: Any, expected: dict[str, Any]) -> None:
    assert ToolCall("c", arguments=arguments).input() == expected


def test_tool_call_defaults_keep_old_constructions_working() -> None:
    call = ToolCall("c")
    assert (call.name, call.arguments, call.permission, call.agent) == ("", "", None, None)
