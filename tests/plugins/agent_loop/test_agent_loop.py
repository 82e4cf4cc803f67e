"""The agent loop on a real runtime with a scripted model (dsh-core §9, scenarios 43-67).

The model is ``dsh.testing.ScriptedModel``: each call takes the next reply of its
script and yields its chunks; a reply may ``Wait`` on an event (to hold the stream
open) or ``Mark`` one (to tell the test how far the stream got). Interleavings are driven by
events only, never by sleeping.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import pytest
from pydantic import BaseModel

from dsh import ConfigError, Context, Fiber
from dsh.testing import Mark, Reply, ScriptedModel, Wait, failure, text, tool_call, tool_calls
from dsh_agent import (
    AgentArgumentError,
    AgentError,
    AgentRegistry,
    AgentTypeError,
    NoModelError,
    StepBlocked,
)
from dsh_agent_loop import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    AgentLoop,
    LoopAgent,
    run_tool_calls,
)
from dsh_llm import (
    BlockStart,
    Chunk,
    Finish,
    Llm,
    LlmError,
    LlmFailure,
    LlmRequest,
    Message,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
)
from dsh_session import ChunkRun, Session, SessionEvent, Sessions
from dsh_session_jsonl import SessionWriteError
from dsh_system_prompt import (
    TOOL_ORDER_REST,
    AssembleContext,
    PromptAssembly,
    PromptSection,
    SystemPrompt,
)
from dsh_tools import Tool, ToolCall, ToolResult, Tools
from tests.support import ANSWERED_STEP, IDENT, event_data, event_types

pytestmark = pytest.mark.anyio

BOUNDARIES = ("turn/start", "turn/end", "step/start", "step/end")
#: The boundaries of a turn that ended before its first step, and of a one-step turn.
NO_STEP = ["turn/start", "turn/end"]
ONE_STEP = ["turn/start", "step/start", "step/end", "turn/end"]

#: An ``agent/pre-step`` listener's ``call_next``: the messages the rest of the chain sends.
NextMessages = Callable[[], Awaitable[list[Message]]]
#: What a test's pre-step listener does before it passes the step on.
Look = Callable[[LoopAgent, list[Message], int, int], None]


# -- the rig ------------------------------------------------------------------------------


@dataclass
class LoopRig:
    root: Context
    model: ScriptedModel
    loop: Fiber
    statuses: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, int, int, BaseException]] = field(default_factory=list)

    def agent(self, agent_id: str = "a", **options: Any) -> LoopAgent:
        options.setdefault("model", "mock")
        return cast("LoopAgent", self.root.agents.create(agent_id, **options))

    async def owned(self, agent_id: str) -> tuple[Fiber, LoopAgent]:
        """A plugin that creates agent ``agent_id`` on ``mock``: its fiber, and the agent."""
        made: list[LoopAgent] = []

        def owner(ctx: Context, config: None) -> None:
            made.append(ctx.agents.create(agent_id, model="mock"))

        fiber = await self.root.plugin(owner)
        (agent,) = made
        return fiber, agent

    def tool(self, name: str, execute: Callable[..., Awaitable[str | ToolResult]]) -> None:
        self.root.tools.register(
            Tool(name=name, description=f"the {name} tool", parameters=Args, execute=execute)
        )


class Args(BaseModel):
    text: str = ""


@asynccontextmanager
async def loop_rig(
    persona: str = "", tool_order: list[str] | None = None, max_parallel: int = 8
) -> AsyncIterator[LoopRig]:
    async with Context() as root:
        await root.plugin(SystemPrompt, {"persona": persona, "tool_order": tool_order})
        await root.plugin(Llm)
        await root.plugin(Sessions)
        await root.plugin(AgentRegistry)
        await root.plugin(Tools)
        loop = await root.plugin(AgentLoop, {"max_parallel_tool_calls": max_parallel})
        model = ScriptedModel(models=["mock"])
        model.install(root)
        state = LoopRig(root, model, loop)

        def on_status(agent: LoopAgent, status: str) -> None:
            state.statuses.append((agent.id, status))

        def on_error(agent: LoopAgent, turn: int, step: int, error: BaseException) -> None:
            state.errors.append((agent.id, turn, step, error))

        root.on("agent/status", on_status)
        root.on("agent/error", on_error)
        yield state


async def run(agent: LoopAgent, *messages: str) -> None:
    for message in messages:
        agent.send(message)
    await agent.when_idle()


def boundaries(session: Session) -> list[str]:
    return [event.type for event in session.events if event.type in BOUNDARIES]


def ends(session: Session) -> list[Mapping[str, Any]]:
    return [data["reason"] for data in event_data(session, "turn/end")]


def message_texts(request: LlmRequest) -> list[str]:
    return [message.text for message in request.messages]


async def refused_turn(r: LoopRig, event: str, listener: Callable[..., Any]) -> Mapping[str, Any]:
    """A turn of a new agent failed by the ``event`` ``listener``'s wrong answer: the
    turn's end, whose error names the event."""
    r.root.on(event, listener)
    agent = r.agent()
    await run(agent, "hi")
    (end,) = ends(agent.session)
    assert end["code"] == "AGENT_TYPE"
    assert event in end["message"]
    return end


async def steered(
    r: LoopRig, reached: anyio.Event, steering: str, release: anyio.Event, first: str = "hi"
) -> LoopAgent:
    """A new agent sent ``first``, steered with ``steering`` once the turn has
    ``reached`` an event, then ``release``-d and idle."""
    agent = r.agent()
    agent.send(first)
    await reached.wait()
    agent.steer(steering)
    release.set()
    await agent.when_idle()
    return agent


def passing_on(look: Look) -> Callable[..., Awaitable[list[Message]]]:
    """An ``agent/pre-step`` listener that calls ``look(agent, messages, turn, step)``,
    then sends what the rest of the chain does."""

    async def listener(
        agent: LoopAgent, messages: list[Message], turn: int, step: int, call_next: NextMessages
    ) -> list[Message]:
        look(agent, messages, turn, step)
        return await call_next()

    return listener


def setting_variable(name: str, value: str) -> Callable[..., Awaitable[PromptAssembly]]:
    """A ``system-prompt/assemble`` listener that sets the variable ``name`` to ``value``
    in what the rest of the chain assembles."""

    async def listener(
        assembly: PromptAssembly, context: AssembleContext, call_next: Callable[[], Any]
    ) -> PromptAssembly:
        result: PromptAssembly = await call_next()
        result.variables[name] = value
        return result

    return listener


# -- basic turns (43-46) ------------------------------------------------------------------


async def test_simple_turn() -> None:
    async with loop_rig() as r:
        answer = text(*"hello world", usage=(10, 11))
        r.model.reply(answer)
        agent = r.agent()
        assert agent.status == "idle"
        await run(agent, "hi")
        session = agent.session
        assert boundaries(session) == ONE_STEP
        kinds = event_types(session)
        assert kinds[:4] == ["turn/start", "user/message", "step/start", "request/header"]
        assert kinds[-4:] == ["assistant/message", "usage/step", "step/end", "turn/end"]
        assert kinds.count("assistant/chunk") == len(answer)
        (message,) = event_data(session, "assistant/message")
        assert message["usage"] == {"input_tokens": 10, "output_tokens": 11}
        assert message["turn"] == 1
        assert message["step"] == 1
        assert session.derive_messages() == [
            Message.user("hi"),
            Message("assistant", (TextBlock("hello world"),)),
        ]
        assert ends(session) == [{"kind": "completed"}]
        assert session.last_turn() == 1
        assert session.turn_end(1) == {"kind": "completed"}
        assert r.statuses == [("a", "running"), ("a", "idle")]
        assert agent.status == "idle"
        (request,) = r.model.requests
        assert request.messages == (Message.user("hi"),)
        assert request.system == IDENT
        assert request.tools == ()
        assert (request.model, request.session_id, request.turn, request.step) == (
            "mock",
            session.id,
            1,
            1,
        )
        assert request.max_tokens is None
        (header,) = event_data(session, "request/header")
        assert header == {
            "turn": 1,
            "step": 1,
            "header": {"model": "mock", "tools": [], "system": IDENT},
        }
        assert r.errors == []


async def test_tool_round_trip() -> None:
    async with loop_rig() as r:

        async def echo(args: Args, call: ToolCall) -> str:
            return f"echo: {args.text}"

        r.tool("echo", echo)
        r.model.reply(tool_calls(tool_call("echo", {"text": "ping"}, id="c1")), text("done"))
        agent = r.agent()
        await run(agent, "use the tool")
        first, second = r.model.requests
        assert first.messages == (Message.user("use the tool"),)
        assert second.messages[1:] == (
            Message("assistant", (ToolCallBlock("c1", "echo", '{"text": "ping"}'),)),
            Message("tool", (ToolResultBlock("c1", "echo: ping", False),)),
        )
        session = agent.session
        assert event_data(session, "tool/call") == [
            {"turn": 1, "step": 1, "call_id": "c1", "name": "echo", "arguments": '{"text": "ping"}'}
        ]
        assert event_data(session, "tool/result") == [
            {
                "turn": 1,
                "step": 1,
                "call_id": "c1",
                "name": "echo",
                "content": "echo: ping",
                "is_error": False,
            }
        ]
        assert boundaries(session) == [
            "turn/start",
            "step/start",
            "step/end",
            "step/start",
            "step/end",
            "turn/end",
        ]
        # The header did not change between the steps: it is logged once.
        assert len(event_data(session, "request/header")) == 1
        assert ends(session) == [{"kind": "completed"}]


async def test_persona_with_model_variable_and_tool_guidance() -> None:
    async with loop_rig(persona="You are a test agent on {{model}}.") as r:

        async def noop(args: Args, call: ToolCall) -> str:
            return ""

        r.tool("noop", noop)
        r.root.system_prompt.section(
            PromptSection(name="tool:noop", order=100, text="Use the noop tool wisely.")
        )
        r.model.reply(text("ok"))
        await run(r.agent(), "hi")
        (request,) = r.model.requests
        assert request.system == (
            f"{IDENT}\n\nYou are a test agent on mock.\n\nUse the noop tool wisely."
        )
        assert [tool.name for tool in request.tools] == ["noop"]
        assert request.tools[0].description == "the noop tool"


async def test_cwd_variable_comes_from_create() -> None:
    async with loop_rig(persona="Working in {{cwd}}.") as r:
        r.model.reply(text("ok"))
        agent = r.agent(cwd="/srv/space")
        assert agent.cwd == "/srv/space"
        assert agent.session.header.cwd == "/srv/space"
        await run(agent, "hi")
        assert r.model.requests[0].system == f"{IDENT}\n\nWorking in /srv/space."


async def test_agent_persona_is_scoped_to_the_agent() -> None:
    async with loop_rig(persona="Global persona.") as r:
        r.model.reply(text("a"), text("b"))
        mine = r.agent("mine", persona="Mine, on {{model}}.")
        other = r.agent("other")
        await run(mine, "hi")
        await run(other, "hi")
        assert [q.system for q in r.model.requests] == [
            f"{IDENT}\n\nMine, on mock.",
            f"{IDENT}\n\nGlobal persona.",
        ]


# -- errors and the backstop (47-51) ------------------------------------------------------


async def supply_cwd_by_variable(r: LoopRig, agent: LoopAgent) -> None:
    agent.ctx.system_prompt.variable("cwd", lambda context: "/rescued")


async def supply_cwd_by_waterfall(r: LoopRig, agent: LoopAgent) -> None:
    agent.ctx.on("system-prompt/assemble", setting_variable("cwd", "/rescued"))


@pytest.mark.parametrize("supply", [supply_cwd_by_variable, supply_cwd_by_waterfall])
async def test_backstop_unset_variable_fails_the_turn_then_recovers(
    supply: Callable[[LoopRig, LoopAgent], Awaitable[None]],
) -> None:
    async with loop_rig(persona="In {{cwd}}.") as r:
        agent = r.agent()
        await run(agent, "first")
        assert r.model.requests == []
        message = (
            'prompt variable "{{cwd}}" has no value for this assembly '
            '(section "deployment:persona")'
        )
        ((agent_id, turn, step, error),) = r.errors
        assert (agent_id, turn, step, str(error)) == ("a", 1, 1, message)
        assert ends(agent.session) == [
            {"kind": "error", "message": message, "code": "PROMPT_RENDER"}
        ]
        # No step was opened: the turn is balanced without one.
        assert boundaries(agent.session) == NO_STEP
        await supply(r, agent)
        r.model.reply(text("ok"))
        await run(agent, "second")
        assert [end["kind"] for end in ends(agent.session)] == ["error", "completed"]
        (request,) = r.model.requests
        assert request.system == f"{IDENT}\n\nIn /rescued."
        # The failed turn got no answer: its message is in the log, not in the
        # history, so it is not sent again (RFC 0009).
        assert message_texts(request) == ["second"]
        assert [m.text for m in agent.session.derive_messages()] == ["second", "ok"]


async def test_late_model_through_the_request_waterfall() -> None:
    async with loop_rig(persona="You run on {{model}}.") as r:
        agent = r.agent(model=None)

        async def choose(
            agent: LoopAgent, request: LlmRequest, call_next: Callable[[], Any]
        ) -> LlmRequest:
            seeded: LlmRequest = await call_next()
            assert seeded.model == ""
            return dataclasses.replace(seeded, model="mock")

        agent.ctx.on("system-prompt/assemble", setting_variable("model", "mock"))
        agent.ctx.on("agent/request", choose)
        r.model.reply(text("ok"))
        await run(agent, "hi")
        (request,) = r.model.requests
        assert request.model == "mock"
        assert request.system == f"{IDENT}\n\nYou run on mock."
        assert event_data(agent.session, "request/header")[0]["header"]["model"] == "mock"


async def test_no_model_names_the_request_waterfall() -> None:
    async with loop_rig() as r:
        agent = r.agent(model=None)
        await run(agent, "hi")
        assert r.model.requests == []
        (end,) = ends(agent.session)
        assert end["kind"] == "error"
        assert end["code"] == "NO_MODEL"
        assert 'agent "a" has no model' in end["message"]
        assert "agent/request" in end["message"]
        ((_, turn, step, error),) = r.errors
        assert (turn, step) == (1, 1)
        assert isinstance(error, NoModelError)
        assert boundaries(agent.session) == NO_STEP


async def test_empty_assembly_sends_no_system_prompt() -> None:
    async with loop_rig(persona="Never seen.") as r:

        def empty(
            assembly: PromptAssembly, context: AssembleContext, call_next: Callable[[], Any]
        ) -> PromptAssembly:
            return PromptAssembly(sections=[], tools=[], variables={})

        r.root.on("system-prompt/assemble", empty)
        r.model.reply(text("ok"))
        agent = r.agent()
        await run(agent, "hi")
        (request,) = r.model.requests
        assert request.system is None
        assert request.tools == ()
        header = event_data(agent.session, "request/header")[0]["header"]
        assert "system" not in header


async def test_request_is_frozen_and_a_replacement_is_sent_and_logged() -> None:
    async with loop_rig() as r:
        other = ScriptedModel()
        other.reply(text("from the other model"))
        r.root.llm.register_adapter(["other-model"], other)
        refused: list[BaseException] = []

        async def reroute(
            agent: LoopAgent, request: LlmRequest, call_next: Callable[[], Any]
        ) -> LlmRequest:
            seeded: LlmRequest = await call_next()
            try:
                seeded.model = "mutated"  # type: ignore[misc]
            except dataclasses.FrozenInstanceError as exc:
                refused.append(exc)
            return dataclasses.replace(seeded, model="other-model")

        r.root.on("agent/request", reroute)
        agent = r.agent()
        await run(agent, "hi")
        assert len(refused) == 1
        assert r.model.requests == []
        assert [q.model for q in other.requests] == ["other-model"]
        assert event_data(agent.session, "request/header")[0]["header"]["model"] == "other-model"
        assert ends(agent.session) == [{"kind": "completed"}]


async def test_request_listener_must_return_a_request() -> None:
    async with loop_rig() as r:

        def wrong(agent: LoopAgent, request: LlmRequest, call_next: Callable[[], Any]) -> str:
            return "not a request"

        end = await refused_turn(r, "agent/request", wrong)
        assert "str" in end["message"]
        assert isinstance(r.errors[0][3], AgentTypeError)


async def test_unknown_model_lists_the_known_models() -> None:
    async with loop_rig() as r:
        agent = r.agent(model="nope")
        await run(agent, "hi")
        (end,) = ends(agent.session)
        assert end == {
            "kind": "error",
            "message": 'no adapter serves model "nope"; known models: mock',
            "code": "NO_ADAPTER",
        }
        assert boundaries(agent.session) == ONE_STEP
        assert isinstance(r.errors[0][3], LlmError)


# -- pre-step (52-54) ---------------------------------------------------------------------


async def test_pre_step_runs_once_per_step_before_step_start() -> None:
    async with loop_rig() as r:
        seen: list[tuple[int, int, int, int]] = []
        agent = r.agent()

        def note(agent: LoopAgent, messages: list[Message], turn: int, step: int) -> None:
            started = event_types(agent.session).count("step/start")
            seen.append((turn, step, len(messages), started))

        async def echo(args: Args, call: ToolCall) -> str:
            return "pong"

        r.tool("echo", echo)
        agent.ctx.on("agent/pre-step", passing_on(note))
        r.model.reply(tool_calls(tool_call("echo", id="c1")), text("done"))
        await run(agent, "go")
        assert seen == [(1, 1, 1, 0), (1, 2, 0, 1)]


async def test_pre_step_rewrites_the_messages() -> None:
    async with loop_rig() as r:

        def rewrite(agent: LoopAgent, messages: list[Message], *_: Any) -> list[Message]:
            return [Message.user(f"rewritten: {m.text}") for m in messages]

        r.root.on("agent/pre-step", rewrite)
        r.model.reply(text("ok"))
        agent = r.agent()
        await run(agent, "original")
        logged = event_data(agent.session, "user/message")
        assert [Message.from_json(d["message"]).text for d in logged] == ["rewritten: original"]
        assert message_texts(r.model.requests[0]) == ["rewritten: original"]


async def test_pre_step_adds_a_message() -> None:
    async with loop_rig() as r:

        def add(agent: LoopAgent, messages: list[Message], turn: int, step: int) -> None:
            if step == 1:
                messages.append(Message.user("extra context"))

        r.root.on("agent/pre-step", passing_on(add))
        r.model.reply(text("ok"))
        agent = r.agent()
        await run(agent, "hi")
        logged = event_data(agent.session, "user/message")
        assert [(d["turn"], d["step"]) for d in logged] == [(1, 1), (1, 1)]
        assert message_texts(r.model.requests[0]) == ["hi", "extra context"]


async def test_pre_step_blocks_the_step() -> None:
    async with loop_rig() as r:

        def block(*_: Any) -> list[Message]:
            raise StepBlocked("not on a Sunday")

        r.root.on("agent/pre-step", block)
        agent = r.agent()
        await run(agent, "hi")
        assert event_types(agent.session) == NO_STEP
        assert ends(agent.session) == [{"kind": "blocked", "message": "not on a Sunday"}]
        assert r.model.requests == []
        assert r.errors == []


async def test_pre_step_that_takes_every_message_ends_the_turn_without_a_step() -> None:
    async with loop_rig() as r:

        def swallow(*_: Any) -> list[Message]:
            return []

        r.root.on("agent/pre-step", swallow)
        agent = r.agent()
        await run(agent, "/help")
        assert event_types(agent.session) == NO_STEP
        assert ends(agent.session) == [{"kind": "completed"}]
        assert r.model.requests == []


async def test_pre_step_must_return_messages() -> None:
    async with loop_rig() as r:

        def wrong(*_: Any) -> list[str]:
            return ["not a message"]

        await refused_turn(r, "agent/pre-step", wrong)


async def test_throwing_pre_step_fails_one_turn_and_the_queue_goes_on() -> None:
    async with loop_rig() as r:
        armed = [True]

        def broken(*_: Any) -> None:
            if armed.pop() if armed else False:
                raise RuntimeError("prompt hook broke")

        r.root.on("agent/pre-step", passing_on(broken))
        r.model.reply(text("ok"))
        agent = r.agent()
        await run(agent, "first", "second")
        assert ends(agent.session) == [
            {"kind": "error", "message": "prompt hook broke", "code": "UNKNOWN"},
            {"kind": "completed"},
        ]
        assert [(turn, step) for _, turn, step, _ in r.errors] == [(1, 1)]
        # The first message never reached the log: the hook failed before it.
        (request,) = r.model.requests
        assert message_texts(request) == ["second"]
        assert boundaries(agent.session) == [*NO_STEP, *ONE_STEP]


# -- stream outcomes (56-58) --------------------------------------------------------------


@pytest.mark.parametrize("reason", ["error", "aborted"])
async def test_failed_stream_fails_the_turn_with_the_failure(reason: str) -> None:
    async with loop_rig() as r:
        code = "RATE_LIMIT" if reason == "error" else "ABORTED"
        r.model.reply(failure("slow down", code, aborted=reason == "aborted"), text("ok"))
        agent = r.agent()
        await run(agent, "hi")
        assert ends(agent.session) == [{"kind": "error", "message": "slow down", "code": code}]
        assert "assistant/message" not in event_types(agent.session)
        ((_, turn, step, error),) = r.errors
        assert (turn, step) == (1, 1)
        assert isinstance(error, LlmError)
        assert error.failure == LlmFailure("slow down", code)
        assert boundaries(agent.session)[-2:] == ["step/end", "turn/end"]
        # A failing turn followed by a good one.
        await run(agent, "again")
        assert ends(agent.session)[1] == {"kind": "completed"}


async def test_max_tokens_ends_the_turn_and_truncated_calls_do_not_run() -> None:
    async with loop_rig() as r:
        ran: list[str] = []

        async def echo(args: Args, call: ToolCall) -> str:
            ran.append(call.id)
            return "never"

        r.tool("echo", echo)
        r.model.reply(
            [
                BlockStart(0, "text"),
                TextDelta(0, "I will call"),
                BlockStart(1, "tool-call"),
                ToolCallDelta(1, "c1", '{"te', name="echo"),
                Finish("max-tokens"),
            ]
        )
        agent = r.agent()
        await run(agent, "hi")
        assert ran == []
        assert "tool/call" not in event_types(agent.session)
        assert ends(agent.session) == [{"kind": "max-tokens"}]
        (answer,) = event_data(agent.session, "assistant/message")
        assert Message.from_json(answer["message"]) == Message(
            "assistant", (TextBlock("I will call"),)
        )


async def test_max_tokens_is_sticky_when_steering_continues_the_turn() -> None:
    async with loop_rig() as r:
        streaming, go = anyio.Event(), anyio.Event()
        r.model.reply(
            [
                BlockStart(0, "text"),
                TextDelta(0, "cut"),
                Mark(streaming),
                Wait(go),
                Finish("max-tokens"),
            ],
            text("finished"),
        )
        agent = await steered(r, streaming, "go on", go)
        assert len(r.model.requests) == 2
        assert message_texts(r.model.requests[1]) == ["hi", "cut", "go on"]
        assert ends(agent.session) == [{"kind": "max-tokens"}]


async def test_chunks_are_logged_one_event_each() -> None:
    async with loop_rig() as r:
        r.model.reply(text(*"abc", usage=(10, 3)))
        agent = r.agent()
        await run(agent, "hi")
        chunks = [d["chunk"] for d in event_data(agent.session, "assistant/chunk")]
        assert len(chunks) == 7
        assert [c["type"] for c in chunks] == [
            "block-start",
            "text-delta",
            "text-delta",
            "text-delta",
            "block-end",
            "usage",
            "finish",
        ]
        assert "".join(c["text"] for c in chunks if c["type"] == "text-delta") == "abc"
        assert {(d["turn"], d["step"]) for d in event_data(agent.session, "assistant/chunk")} == {
            (1, 1)
        }


# -- steering (59-62, adapted) ------------------------------------------------------------


async def test_steering_during_a_tool_call_lands_in_the_next_step() -> None:
    async with loop_rig() as r:
        started, release = anyio.Event(), anyio.Event()

        async def slow(args: Args, call: ToolCall) -> str:
            started.set()
            await release.wait()
            return "slow result"

        r.tool("slow", slow)
        r.model.reply(tool_calls(tool_call("slow", id="c1")), text("done"))
        agent = await steered(r, started, "also this", release, first="go")
        session = agent.session
        kinds = [k for k in event_types(session) if k not in ("assistant/chunk", "request/header")]
        assert kinds == [
            "turn/start",
            "user/message",
            "step/start",
            "assistant/message",
            "usage/step",
            "tool/call",
            "tool/result",
            "step/end",
            "user/message",
            *ANSWERED_STEP,
            "turn/end",
        ]
        assert event_data(session, "user/message")[1]["step"] == 2
        assert message_texts(r.model.requests[1])[-1] == "also this"
        assert len(ends(session)) == 1


async def test_steering_from_inside_a_tool_comes_after_its_result() -> None:
    async with loop_rig() as r:

        async def remind(args: Args, call: ToolCall) -> str:
            call.agent.steer("a reminder from the tool")
            return "reminded"

        r.tool("remind", remind)
        r.model.reply(tool_calls(tool_call("remind", id="c1")), text("done"))
        agent = r.agent()
        await run(agent, "go")
        kinds = event_types(agent.session)
        assert kinds.index("tool/result") < kinds.index("user/message", 2)
        roles = [m.role for m in r.model.requests[1].messages]
        assert roles == ["user", "assistant", "tool", "user"]


async def test_steering_while_idle_queues_a_turn_each() -> None:
    async with loop_rig() as r:
        r.model.reply(text("one"), text("two"))
        agent = r.agent()
        agent.steer("first")
        agent.steer("second")
        await agent.when_idle()
        assert [message_texts(q) for q in r.model.requests] == [
            ["first"],
            ["first", "one", "second"],
        ]
        assert [end["kind"] for end in ends(agent.session)] == ["completed", "completed"]


async def test_steering_left_by_a_failed_turn_starts_the_next_turn() -> None:
    async with loop_rig() as r:
        streaming, go = anyio.Event(), anyio.Event()
        r.model.reply([Mark(streaming), Wait(go), *failure("boom", "E")], text("ok"))
        agent = await steered(r, streaming, "steered", go)
        assert [end["kind"] for end in ends(agent.session)] == ["error", "completed"]
        # Turn 1 failed before the model said anything: only the steering goes on.
        assert message_texts(r.model.requests[1]) == ["steered"]


# -- each queued message is its own turn; the driver survives everything -----------------


async def test_each_queued_message_is_its_own_turn() -> None:
    async with loop_rig() as r:
        r.model.reply(text("1"), text("2"), text("3"))
        agent = r.agent()
        await run(agent, "a", "b", "c")
        assert [len(q.messages) for q in r.model.requests] == [1, 3, 5]
        assert [q.turn for q in r.model.requests] == [1, 2, 3]
        assert [end["kind"] for end in ends(agent.session)] == ["completed"] * 3
        # One burst of work: running once, idle once.
        assert r.statuses == [("a", "running"), ("a", "idle")]


async def test_fifty_queued_messages_run_as_fifty_turns_in_order() -> None:
    async with loop_rig() as r:
        count = 50
        r.model.reply(*(text(f"answer {i}") for i in range(count)))
        agent = r.agent()
        await run(agent, *(f"message {i}" for i in range(count)))
        session = agent.session
        assert [d["turn"] for d in event_data(session, "turn/start")] == list(range(1, count + 1))
        assert [d["turn"] for d in event_data(session, "turn/end")] == list(range(1, count + 1))
        assert all(end == {"kind": "completed"} for end in ends(session))
        assert [message_texts(q)[-1] for q in r.model.requests] == [
            f"message {i}" for i in range(count)
        ]
        assert len(session.derive_messages()) == 2 * count
        assert r.statuses == [("a", "running"), ("a", "idle")]


def raise_on(kind: str) -> Callable[[LoopRig, LoopAgent], None]:
    """A session/event listener that raises once, on the first event of ``kind``."""

    def install(r: LoopRig, agent: LoopAgent) -> None:
        armed = [True]

        def listener(session: Session, event: SessionEvent) -> None:
            if event.type == kind and armed:
                armed.clear()
                raise RuntimeError(f"listener broke on {kind}")

        r.root.on("session/event", listener)

    return install


def raise_in_assemble(r: LoopRig, agent: LoopAgent) -> None:
    armed = [True]

    async def listener(
        assembly: PromptAssembly, context: AssembleContext, call_next: Callable[[], Any]
    ) -> PromptAssembly:
        if armed:
            armed.clear()
            raise RuntimeError("assemble broke")
        result: PromptAssembly = await call_next()
        return result

    agent.ctx.on("system-prompt/assemble", listener)


def raise_in_status(r: LoopRig, agent: LoopAgent) -> None:
    def listener(agent: LoopAgent, status: str) -> None:
        raise RuntimeError("status listener broke")

    r.root.on("agent/status", listener)


def raise_in_error_listener(r: LoopRig, agent: LoopAgent) -> None:
    raise_on("assistant/chunk")(r, agent)

    def listener(agent: LoopAgent, turn: int, step: int, error: BaseException) -> None:
        raise RuntimeError("error listener broke")

    r.root.on("agent/error", listener)


@pytest.mark.parametrize(
    ("breakage", "first"),
    [
        (raise_on("turn/start"), "error"),
        (raise_on("user/message"), "error"),
        (raise_on("assistant/chunk"), "error"),
        (raise_on("step/end"), "error"),
        (raise_on("turn/end"), "completed"),
        (raise_in_assemble, "error"),
        (raise_in_status, "completed"),
        (raise_in_error_listener, "error"),
    ],
)
async def test_nothing_a_turn_raises_stops_the_driver(
    breakage: Callable[[LoopRig, LoopAgent], None], first: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with loop_rig() as r:
        agent = r.agent()
        breakage(r, agent)
        r.model.reply(text("one"), text("two"))
        with caplog.at_level(logging.ERROR, logger="dsh.agent-loop"):
            await run(agent, "first")
            await run(agent, "second")
        reasons = ends(agent.session)
        assert [end["kind"] for end in reasons] == [first, "completed"]
        if first == "error":
            assert "broke" in reasons[0]["message"]
        assert boundaries(agent.session).count("turn/start") == 2
        assert boundaries(agent.session).count("turn/end") == 2


async def test_a_failed_write_of_the_turn_end_is_logged_and_the_driver_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with loop_rig() as r:
        agent = r.agent("writer")
        armed = [True]

        def disk_full(session: Session, event: SessionEvent) -> None:
            if event.type == "turn/end" and armed:
                armed.clear()
                raise SessionWriteError("cannot write session file: no space left on device")

        r.root.on("session/event", disk_full)
        r.model.reply(text("one"), text("two"))
        with caplog.at_level(logging.ERROR, logger="dsh.agent-loop"):
            await run(agent, "first")
            assert agent.status == "idle"
            await run(agent, "second")
        (record,) = [rec for rec in caplog.records if rec.name == "dsh.agent-loop"]
        assert record.getMessage() == "recording the end of turn 1 of agent 'writer' failed"
        assert isinstance(record.exc_info and record.exc_info[1], SessionWriteError)
        # The turn end is in the log (persistence failed, not the turn) and turn 2 ran.
        assert [end["kind"] for end in ends(agent.session)] == ["completed", "completed"]
        assert [m.text for m in agent.session.derive_messages()] == [
            "first",
            "one",
            "second",
            "two",
        ]
        assert r.errors == []
        assert r.statuses == [("writer", "running"), ("writer", "idle")] * 2


async def test_agent_error_names_the_step_it_failed_in() -> None:
    async with loop_rig() as r:
        agent = r.agent()
        raise_on("turn/start")(r, agent)
        raise_on("step/start")(r, agent)
        r.model.reply(text("ok"))
        await run(agent, "one", "two", "three")
        assert [(turn, step) for _, turn, step, _ in r.errors] == [(1, 0), (2, 1)]
        assert [end["kind"] for end in ends(agent.session)] == ["error", "error", "completed"]
        # A step whose start could not be published still gets its end: balanced.
        assert boundaries(agent.session) == [*NO_STEP, *ONE_STEP, *ONE_STEP]


# -- cancellation and disposal (64) -------------------------------------------------------


def partial_text(streamed: anyio.Event) -> list[Chunk | Wait | Mark]:
    """A reply that streams part of an answer, sets ``streamed``, then holds the stream."""
    never = anyio.Event()
    return [BlockStart(0, "text"), TextDelta(0, "partial answer"), Mark(streamed), Wait(never)]


def heard_order(root: Context, *events: str) -> list[str]:
    """The order in which ``root`` hears each ``turn/end`` session event and the
    ``events`` named."""
    order: list[str] = []

    def on_event(session: Session, event: SessionEvent) -> None:
        if event.type == "turn/end":
            order.append("turn/end")

    root.on("session/event", on_event)
    for name in events:
        root.on(name, lambda *_, heard=name: order.append(heard))
    return order


async def test_a_stream_that_fails_midway_keeps_the_partial_answer_like_a_cancel() -> None:
    # What the user saw stays in the conversation, whichever way the stream broke.
    async with loop_rig() as r:
        r.model.reply(
            [*text("partial answer")[:2], *failure("the server hung up", "STREAM_INTERRUPTED")],
            text("ok"),
        )
        agent = r.agent()
        await run(agent, "hi")
        session = agent.session
        assert ends(session)[0]["code"] == "STREAM_INTERRUPTED"
        (partial,) = event_data(session, "assistant/message")
        assert partial["interrupted"] is True
        assert Message.from_json(partial["message"]).text == "partial answer"
        await run(agent, "again")
        assert message_texts(r.model.requests[1]) == ["hi", "partial answer", "again"]


async def test_cancel_during_streaming_keeps_the_partial_answer() -> None:
    async with loop_rig() as r:
        streamed = anyio.Event()
        r.model.reply(partial_text(streamed), text("ok"))
        agent = r.agent()
        agent.send("hi")
        await streamed.wait()
        assert agent.status == "running"
        cancelled = [False]

        async def wait_idle() -> None:
            await agent.when_idle()
            assert cancelled[0], "when_idle returned while the turn still ran"

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_idle)
            cancelled[0] = True
            agent.cancel()
        session = agent.session
        assert ends(session) == [{"kind": "aborted", "reason": "user"}]
        (partial,) = event_data(session, "assistant/message")
        assert partial["interrupted"] is True
        assert Message.from_json(partial["message"]).text == "partial answer"
        assert boundaries(session) == ONE_STEP
        assert r.errors == []
        assert r.statuses == [("a", "running"), ("a", "idle")]
        # The interrupted answer is part of the history the next turn sends.
        await run(agent, "again")
        assert message_texts(r.model.requests[1]) == ["hi", "partial answer", "again"]


async def test_cancel_before_any_text_logs_no_assistant_message() -> None:
    async with loop_rig() as r:
        streaming, never = anyio.Event(), anyio.Event()
        r.model.reply([Mark(streaming), Wait(never)])
        agent = r.agent()
        agent.send("hi")
        agent.send("dropped by the cancel")
        await streaming.wait()
        agent.cancel()
        await agent.when_idle()
        assert "assistant/message" not in event_types(agent.session)
        assert ends(agent.session) == [{"kind": "aborted", "reason": "user"}]
        assert len(r.model.requests) == 1


async def test_cancel_from_a_status_listener_aborts_the_turn_at_once() -> None:
    async with loop_rig() as r:
        agent = r.agent()

        def cancel_on_running(agent: LoopAgent, status: str) -> None:
            if status == "running":
                agent.cancel()

        agent.ctx.on("agent/status", cancel_on_running)
        await run(agent, "hi")
        assert event_types(agent.session) == NO_STEP
        assert ends(agent.session) == [{"kind": "aborted", "reason": "user"}]
        assert r.model.requests == []


async def test_idle_cancel_is_a_no_op() -> None:
    async with loop_rig() as r:
        agent = r.agent()
        agent.cancel()
        assert agent.session.events == []
        assert agent.status == "idle"
        assert r.statuses == []
        r.model.reply(text("ok"))
        await run(agent, "hi")
        assert ends(agent.session) == [{"kind": "completed"}]


async def test_cancelling_a_queued_message_wakes_idle_waiters() -> None:
    # A waiter, then a canceller, then the driver are woken in one pass (in this order
    # on asyncio): cancel() drops the message the driver has not picked up yet, and
    # the waiter must be released. On trio any order may happen; the waiter must be
    # released in every one of them.
    async with loop_rig() as r:
        r.model.reply(text("ok"))
        agent = r.agent()
        waiting, cancelling, released = anyio.Event(), anyio.Event(), anyio.Event()

        async def waiter() -> None:
            await waiting.wait()
            await agent.when_idle()
            released.set()

        async def canceller() -> None:
            await cancelling.wait()
            agent.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            tg.start_soon(canceller)
            await anyio.wait_all_tasks_blocked()
            waiting.set()
            cancelling.set()
            agent.send("hi")
            with anyio.fail_after(5):
                await released.wait()
        assert agent.status == "idle"


async def test_when_idle_serves_several_waiters() -> None:
    async with loop_rig() as r:
        streamed, release = anyio.Event(), anyio.Event()
        r.model.reply([Mark(streamed), Wait(release), *text("ok")])
        agent = r.agent()
        agent.send("hi")
        await streamed.wait()
        woke: list[int] = []

        async def waiter(n: int) -> None:
            await agent.when_idle()
            woke.append(n)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter, 1)
            tg.start_soon(waiter, 2)
            await anyio.wait_all_tasks_blocked()
            assert woke == []
            release.set()
        assert sorted(woke) == [1, 2]
        assert ends(agent.session) == [{"kind": "completed"}]


async def test_an_agent_can_dispose_itself_from_its_own_tool() -> None:
    async with loop_rig() as r:
        gone = anyio.Event()
        finished: list[str] = []

        async def leave(args: Args, call: ToolCall) -> str:
            await call.agent.dispose()
            finished.append("returned from dispose")
            await anyio.lowlevel.checkpoint()
            finished.append("never: the turn is cancelled")
            return "bye"

        def on_disposed(agent: LoopAgent) -> None:
            gone.set()

        r.root.on("agent/disposed", on_disposed)
        r.tool("leave", leave)
        r.model.reply(tool_calls(tool_call("leave", id="c1")))
        agent = r.agent()
        agent.send("please leave")
        await gone.wait()
        assert finished == ["returned from dispose"]
        assert ends(agent.session) == [{"kind": "aborted", "reason": "disposed"}]
        (result,) = event_data(agent.session, "tool/result")
        assert result["code"] == "ABORTED"
        assert r.root.agents.list() == []


async def test_dispose_mid_turn_aborts_with_reason_disposed() -> None:
    async with loop_rig() as r:
        streamed = anyio.Event()
        r.model.reply(partial_text(streamed))
        agent = r.agent()
        order = heard_order(r.root, "agent/disposed", "session/disposed")
        agent.send("hi")
        await streamed.wait()
        await agent.dispose()
        assert ends(agent.session) == [{"kind": "aborted", "reason": "disposed"}]
        assert order == ["turn/end", "agent/disposed", "session/disposed"]
        assert r.errors == []
        assert r.root.agents.get("a") is None
        assert r.root.sessions.get(agent.session.id) is None
        assert agent.status == "idle"
        assert r.statuses == [("a", "running"), ("a", "idle")]
        with pytest.raises(AgentError, match='agent "a" is disposed'):
            agent.send("too late")
        await agent.when_idle()
        await agent.dispose()  # a second dispose does nothing


async def test_disposing_the_owner_mid_turn_aborts_with_reason_disposed() -> None:
    async with loop_rig() as r:
        streamed = anyio.Event()
        r.model.reply(partial_text(streamed))
        fiber, agent = await r.owned("owned")
        order = heard_order(r.root, "agent/disposed")
        agent.send("hi")
        await streamed.wait()
        await fiber.dispose()
        assert ends(agent.session) == [{"kind": "aborted", "reason": "disposed"}]
        assert order == ["turn/end", "agent/disposed"]
        assert r.root.agents.list() == []
        assert r.errors == []


async def test_two_disposals_at_once_still_record_the_turn_end_first() -> None:
    async with loop_rig() as r:
        streamed = anyio.Event()
        r.model.reply(partial_text(streamed))
        agent = r.agent()
        order = heard_order(r.root, "agent/disposed")
        agent.send("hi")
        await streamed.wait()
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.dispose)
            tg.start_soon(agent.dispose)
        assert order == ["turn/end", "agent/disposed"]
        assert ends(agent.session) == [{"kind": "aborted", "reason": "disposed"}]


async def test_an_idle_agent_has_no_driver_until_its_first_message() -> None:
    async with loop_rig() as r:
        fiber, quiet = await r.owned("quiet")
        busy = r.agent("busy")

        def started() -> list[bool]:
            return [agent._driver is not None for agent in (quiet, busy)]

        assert started() == [False, False]
        r.model.reply(text("ok"))
        await run(busy, "hi")
        assert started() == [False, False]  # the driver ended with the turn
        assert ends(busy.session) == [{"kind": "completed"}]
        # Disposed by its owner without a turn ever run, it takes no more messages.
        await fiber.dispose()
        assert r.root.agents.get("quiet") is None
        with pytest.raises(AgentError, match='agent "quiet" is disposed'):
            quiet.send("anyone?")
        assert started() == [False, False]
        await quiet.when_idle()


async def test_unloading_the_loop_disposes_every_agent_it_made() -> None:
    async with loop_rig() as r:
        fiber, agent = await r.owned("owned")
        own = r.agent("own")
        streamed = anyio.Event()
        r.model.reply(partial_text(streamed))
        agent.send("hi")
        await streamed.wait()
        await r.loop.dispose()
        assert ends(agent.session) == [{"kind": "aborted", "reason": "disposed"}]
        assert r.root.agents.list() == []
        assert fiber.is_active
        for gone in (agent, own):
            with pytest.raises(AgentError, match="is disposed"):
                gone.send("anyone there?")
        # The variables and the factory seat went with the loop.
        assert "model" not in (await r.root.system_prompt.assemble()).variables
        with pytest.raises(AgentError, match="no agent factory registered"):
            r.root.agents.create("late")


# -- tool calls (65, and cancellation of 64) ----------------------------------------------


class Gates:
    """A ``gate`` tool on the rig ``r`` whose calls wait to be released: per-call events
    and one shared record (with ``watch_results``, of the results committed too)."""

    def __init__(self, r: LoopRig, *, watch_results: bool = False) -> None:
        self.rig = r
        self.record: list[str] = []
        self.started: dict[str, anyio.Event] = {}
        self.release: dict[str, anyio.Event] = {}
        self.finished: dict[str, anyio.Event] = {}
        r.tool("gate", self.tool)
        if watch_results:
            r.root.on("session/event", self._committed)

    def event(self, table: dict[str, anyio.Event], name: str) -> anyio.Event:
        return table.setdefault(name, anyio.Event())

    async def tool(self, args: Args, call: ToolCall) -> str:
        name = args.text
        self.record.append(f"start {name}")
        self.event(self.started, name).set()
        await self.event(self.release, name).wait()
        self.record.append(f"end {name}")
        self.event(self.finished, name).set()
        return f"result {name}"

    def _committed(self, session: Session, event: SessionEvent) -> None:
        if event.type == "tool/result":
            self.record.append(f"committed {event.data['call_id']}")

    def go(self, *replies: Reply) -> LoopAgent:
        """Script the model's ``replies`` and send ``go`` to a new agent: the agent."""
        self.rig.model.reply(*replies)
        agent = self.rig.agent()
        agent.send("go")
        return agent


def gate_calls(*names: str) -> Reply:
    """A reply calling the ``gate`` tool once per name (the name is its id and text)."""
    return tool_calls(*(tool_call("gate", {"text": name}, id=name) for name in names))


async def test_tool_calls_run_concurrently_and_commit_in_model_order() -> None:
    async with loop_rig() as r:
        gates = Gates(r, watch_results=True)
        agent = gates.go(gate_calls("A", "B"), text("ok"))
        # Both calls started while neither has finished: they run concurrently.
        await gates.event(gates.started, "A").wait()
        await gates.event(gates.started, "B").wait()
        assert sorted(gates.record) == ["start A", "start B"]
        # B finishes first, but its result waits for A's.
        gates.event(gates.release, "B").set()
        await gates.event(gates.finished, "B").wait()
        assert event_data(agent.session, "tool/result") == []
        gates.event(gates.release, "A").set()
        await agent.when_idle()
        assert gates.record[2:] == ["end B", "end A", "committed A", "committed B"]
        results = event_data(agent.session, "tool/result")
        assert [(d["call_id"], d["content"]) for d in results] == [
            ("A", "result A"),
            ("B", "result B"),
        ]
        tool_messages = [m for m in r.model.requests[1].messages if m.role == "tool"]
        assert [m.content[0] for m in tool_messages] == [
            ToolResultBlock("A", "result A"),
            ToolResultBlock("B", "result B"),
        ]


async def test_a_result_is_committed_as_soon_as_those_before_it_are() -> None:
    async with loop_rig() as r:
        gates = Gates(r, watch_results=True)
        agent = gates.go(gate_calls("A", "B"), text("ok"))
        await gates.event(gates.started, "B").wait()
        gates.event(gates.release, "A").set()
        await gates.event(gates.finished, "A").wait()
        gates.event(gates.release, "B").set()
        await agent.when_idle()
        assert gates.record[2:] == ["end A", "committed A", "end B", "committed B"]


async def test_three_calls_start_together() -> None:
    async with loop_rig() as r:
        gates, names = Gates(r), ["x", "y", "z"]
        agent = gates.go(gate_calls(*names), text("ok"))
        for name in names:
            await gates.event(gates.started, name).wait()
        assert len(gates.record) == 3
        for name in names:
            gates.event(gates.release, name).set()
        await agent.when_idle()
        assert [d["call_id"] for d in event_data(agent.session, "tool/result")] == names


async def test_a_cap_of_one_runs_calls_one_after_another() -> None:
    async with loop_rig(max_parallel=1) as r:
        record: list[str] = []

        async def step(args: Args, call: ToolCall) -> str:
            record.append(f"start {args.text}")
            await anyio.lowlevel.checkpoint()
            record.append(f"end {args.text}")
            return args.text

        r.tool("step", step)
        r.model.reply(
            tool_calls(
                tool_call("step", {"text": "A"}, id="A"), tool_call("step", {"text": "B"}, id="B")
            ),
            text("ok"),
        )
        await run(r.agent(), "go")
        assert record == ["start A", "end A", "start B", "end B"]


async def test_cancel_mid_tool_gives_every_call_an_aborted_result() -> None:
    async with loop_rig(max_parallel=2) as r:
        gates = Gates(r)
        agent = gates.go(
            tool_calls(
                tool_call("gate", {"text": "1"}, id="c1"),
                tool_call("gate", {"text": "2"}, id="c2"),
                tool_call("gate", {"text": "3"}, id="c3"),
            ),
            text("ok"),
        )
        await gates.event(gates.started, "1").wait()
        await gates.event(gates.started, "2").wait()
        agent.cancel()
        await agent.when_idle()
        assert "start 3" not in gates.record
        results = event_data(agent.session, "tool/result")
        assert [(d["call_id"], d["content"], d["is_error"], d["code"]) for d in results] == [
            ("c1", ABORTED.content, True, "ABORTED"),
            ("c2", ABORTED.content, True, "ABORTED"),
            ("c3", ABORTED_BEFORE_DISPATCH.content, True, "ABORTED_BEFORE_DISPATCH"),
        ]
        assert ends(agent.session) == [{"kind": "aborted", "reason": "user"}]
        # Every call has its result, so the history stays valid for the next turn.
        await run(agent, "again")
        roles = [m.role for m in r.model.requests[1].messages]
        assert roles == ["user", "assistant", "tool", "tool", "tool", "user"]


async def test_a_finished_call_keeps_its_result_when_the_turn_is_cancelled() -> None:
    async with loop_rig() as r:
        gates = Gates(r)
        agent = gates.go(gate_calls("A", "B"))
        await gates.event(gates.started, "A").wait()
        await gates.event(gates.started, "B").wait()
        gates.event(gates.release, "B").set()
        await gates.event(gates.finished, "B").wait()
        agent.cancel()
        await agent.when_idle()
        results = event_data(agent.session, "tool/result")
        assert [(d["call_id"], d.get("code")) for d in results] == [("A", "ABORTED"), ("B", None)]


async def test_a_tool_that_cancels_its_own_call_gets_an_aborted_result() -> None:
    async with loop_rig() as r:

        async def quitter(args: Args, call: ToolCall) -> str:
            assert call.cancel_scope is not None
            call.cancel_scope.cancel()
            await anyio.lowlevel.checkpoint()
            return "unreachable"

        r.tool("quitter", quitter)
        r.model.reply(tool_calls(tool_call("quitter", id="c1")), text("ok"))
        agent = r.agent()
        await run(agent, "go")
        (result,) = event_data(agent.session, "tool/result")
        assert result["code"] == "ABORTED"
        assert ends(agent.session) == [{"kind": "completed"}]


async def test_a_single_call_cancelled_mid_run_records_an_aborted_result() -> None:
    # One call takes the fast path (no task group): the cancel still reaches it, its
    # result is logged as aborted and the next turn has a valid history.
    async with loop_rig() as r:
        gates = Gates(r)
        agent = gates.go(gate_calls("solo"), text("ok"))
        await gates.event(gates.started, "solo").wait()
        agent.cancel()
        await agent.when_idle()
        assert gates.record == ["start solo"]
        (result,) = event_data(agent.session, "tool/result")
        assert (result["call_id"], result["content"], result["is_error"], result["code"]) == (
            "solo",
            ABORTED.content,
            True,
            "ABORTED",
        )
        assert boundaries(agent.session)[-2:] == ["step/end", "turn/end"]
        assert ends(agent.session) == [{"kind": "aborted", "reason": "user"}]
        await run(agent, "again")
        roles = [m.role for m in r.model.requests[1].messages]
        assert roles == ["user", "assistant", "tool", "user"]


async def test_a_single_call_cancelled_before_dispatch_never_starts() -> None:
    # A listener cancels the turn when the call is logged: the call is not dispatched.
    async with loop_rig() as r:
        gates = Gates(r)
        r.model.reply(gate_calls("late"))
        agent = r.agent()

        def cancel_on_call(session: Session, event: SessionEvent) -> None:
            if event.type == "tool/call":
                agent.cancel()

        r.root.on("session/event", cancel_on_call)
        await run(agent, "go")
        assert gates.record == []
        (result,) = event_data(agent.session, "tool/result")
        assert result["code"] == "ABORTED_BEFORE_DISPATCH"
        assert ends(agent.session) == [{"kind": "aborted", "reason": "user"}]


async def test_a_single_call_runs_in_the_driving_task() -> None:
    # The fast path awaits the tool in the agent's own task: what the tool sees of the
    # call is the same as on the concurrent path.
    async with loop_rig() as r:
        seen: list[object] = []

        async def probe(args: Args, call: ToolCall) -> str:
            seen.extend([call.id, call.agent, call.cancelled])
            return "probed"

        r.tool("probe", probe)
        r.model.reply(tool_calls(tool_call("probe", id="p1")), text("ok"))
        agent = r.agent()
        await run(agent, "go")
        assert seen == ["p1", agent, False]
        (result,) = event_data(agent.session, "tool/result")
        assert result["content"] == "probed"


async def test_run_tool_calls_alone_looks_the_tools_up_through_the_agent() -> None:
    async with loop_rig() as r:

        async def echo(args: Args, call: ToolCall) -> str:
            return f"echo {args.text}"

        r.tool("echo", echo)
        agent = r.agent()
        calls = [ToolCallBlock(f"c{i}", "echo", f'{{"text": "{i}"}}') for i in (1, 2)]
        await run_tool_calls(agent, 1, 1, calls[:1], 4)
        await run_tool_calls(agent, 1, 2, calls, 4)
        results = event_data(agent.session, "tool/result")
        assert [(d["step"], d["content"]) for d in results] == [
            (1, "echo 1"),
            (2, "echo 1"),
            (2, "echo 2"),
        ]


async def test_tool_errors_become_results_and_the_turn_goes_on() -> None:
    async with loop_rig() as r:

        async def broken(args: Args, call: ToolCall) -> str:
            raise ValueError("disk on fire")

        r.tool("broken", broken)
        r.model.reply(
            tool_calls(tool_call("broken", id="c1"), tool_call("missing", id="c2")), text("ok")
        )
        agent = r.agent()
        await run(agent, "go")
        results = event_data(agent.session, "tool/result")
        assert [(d["content"], d["code"]) for d in results] == [
            ("Error: disk on fire", "TOOL_ERROR"),
            ('unknown tool "missing"', "UNKNOWN_TOOL"),
        ]
        assert ends(agent.session) == [{"kind": "completed"}]


async def test_a_failure_while_recording_a_result_fails_the_turn_with_its_own_message() -> None:
    async with loop_rig() as r:

        async def fine(args: Args, call: ToolCall) -> str:
            return "fine"

        r.tool("fine", fine)
        raise_on("tool/result")(r, r.agent("unused"))
        r.model.reply(
            tool_calls(tool_call("fine", id="c1"), tool_call("fine", id="c2")), text("ok")
        )
        agent = r.agent()
        await run(agent, "go")
        assert ends(agent.session)[0] == {
            "kind": "error",
            "message": "listener broke on tool/result",
            "code": "UNKNOWN",
        }
        # Both results are recorded all the same (the first one raised after it was).
        assert [d["call_id"] for d in event_data(agent.session, "tool/result")] == ["c1", "c2"]


# -- tool order in the request (66) -------------------------------------------------------


async def tools_seen(tool_order: list[str] | None) -> tuple[list[str], list[str], Session]:
    async with loop_rig(tool_order=tool_order) as r:

        async def noop(args: Args, call: ToolCall) -> str:
            return ""

        for name in ("zulu", "alpha", "mike"):
            r.tool(name, noop)
        r.model.reply(text("ok"))
        agent = r.agent()
        await run(agent, "hi")
        sent = [tool.name for q in r.model.requests for tool in q.tools]
        logged = [
            n for d in event_data(agent.session, "request/header") for n in d["header"]["tools"]
        ]
        return sent, logged, agent.session


async def test_tools_are_sent_in_lexicographic_order() -> None:
    sent, logged, _ = await tools_seen(None)
    assert sent == logged == ["alpha", "mike", "zulu"]


async def test_tools_follow_tool_order() -> None:
    sent, logged, _ = await tools_seen(["zulu", TOOL_ORDER_REST])
    assert sent == logged == ["zulu", "alpha", "mike"]


async def test_an_unknown_name_in_tool_order_fails_the_turn_before_any_request() -> None:
    sent, logged, session = await tools_seen(["ghost", TOOL_ORDER_REST])
    assert sent == logged == []
    assert boundaries(session) == NO_STEP
    (end,) = ends(session)
    assert end["code"] == "TOOL_ORDER"
    assert '"ghost"' in end["message"]


async def test_the_request_header_is_logged_again_when_it_changes() -> None:
    async with loop_rig() as r:
        r.model.reply(text("one"), text("two"), text("three"))
        agent = r.agent()
        await run(agent, "a", "b")

        async def noop(args: Args, call: ToolCall) -> str:
            return ""

        r.tool("noop", noop)
        await run(agent, "c")
        headers = event_data(agent.session, "request/header")
        assert [(d["turn"], d["header"]["tools"]) for d in headers] == [(1, []), (3, ["noop"])]


# -- streaming into the log ---------------------------------------------------------------


async def test_a_streamed_answer_is_logged_as_one_packed_run_holding_its_text_once() -> None:
    async with loop_rig() as r:
        words = [f"w{i} " for i in range(1000)]
        r.model.reply(text(*words))
        heard: list[SessionEvent] = []

        def on_event(session: Session, event: SessionEvent) -> None:
            if event.type == "assistant/chunk":
                heard.append(event)

        agent = r.agent()
        agent.ctx.on("session/event", on_event)
        await run(agent, "stream")
        session = agent.session
        # One event per chunk, heard live and read back alike...
        chunks = [e for e in session.events if e.type == "assistant/chunk"]
        assert len(chunks) == len(words) + 3
        assert heard == chunks
        assert [c.data["chunk"]["text"] for c in chunks[1:-2]] == words
        # ...stored as one run whose text is the answer's own string.
        (packed,) = [row for row in session.events.rows() if isinstance(row, ChunkRun)]
        assert len(packed) == len(chunks)
        (answer,) = [m for m in session.history() if m.role == "assistant"]
        assert packed.texts() == [answer.text]
        assert packed.texts()[0] is answer.content[0].text  # type: ignore[union-attr]
        assert len(session.events.rows()) == len(session.events) - len(chunks) + 1


# -- observers ----------------------------------------------------------------------------


async def test_a_session_event_listener_on_agent_ctx_hears_only_that_agent() -> None:
    async with loop_rig() as r:
        r.model.respond = lambda request: "ok"
        agents = [r.agent(f"a{i}") for i in range(3)]
        heard: dict[str, list[str]] = {agent.id: [] for agent in agents}
        everything: list[str] = []
        for agent in agents:

            def listener(session: Session, event: SessionEvent, mine: str = agent.id) -> None:
                assert session.header.meta["agent"] == mine
                heard[mine].append(event.type)

            agent.ctx.on("session/event", listener)
        r.root.on("session/event", lambda session, event: everything.append(event.type))
        for agent in agents:
            await run(agent, "hi")
        for agent in agents:
            assert heard[agent.id] == event_types(agent.session)
        assert len(everything) == sum(len(a.session.events) for a in agents)


# -- creating agents (67 and the factory's arguments) -------------------------------------


async def test_max_tokens_reaches_the_request() -> None:
    async with loop_rig() as r:
        r.model.reply(text("ok"))
        agent = r.agent(max_tokens=256)
        await run(agent, "hi")
        assert r.model.requests[0].max_tokens == 256
        assert event_data(agent.session, "request/header")[0]["header"]["max_tokens"] == 256


@pytest.mark.parametrize("bad", [0, -1, 1.5, float("nan"), True, "256"])
async def test_bad_max_tokens_is_refused_and_leaves_nothing(bad: object) -> None:
    async with loop_rig() as r:
        with pytest.raises(AgentArgumentError, match="max_tokens must be a positive integer"):
            r.agent(max_tokens=bad)
        assert r.root.agents.list() == []
        assert r.root.sessions.list() == []


async def test_create_arguments_are_checked() -> None:
    async with loop_rig() as r:
        with pytest.raises(AgentArgumentError, match="non-empty string"):
            r.agent("")
        existing = r.root.sessions.create()
        with pytest.raises(AgentArgumentError, match="not both"):
            r.agent("b", cwd="/x", session=existing)
        r.agent("taken")
        with pytest.raises(AgentError, match='agent "taken" is already registered'):
            r.agent("taken")
        assert [a.id for a in r.root.agents.list()] == ["taken"]


async def test_generated_ids_skip_taken_ones() -> None:
    async with loop_rig() as r:
        first = r.root.agents.create(model="mock")
        r.agent("agent-2")
        third = r.root.agents.create(model="mock")
        assert (first.id, third.id) == ("agent-1", "agent-3")


async def test_a_vetoed_registration_leaves_nothing_behind() -> None:
    async with loop_rig(persona="Global.") as r:
        armed = [True]

        def veto(agent: LoopAgent) -> None:
            if armed:
                armed.clear()
                raise RuntimeError("no agents today")

        r.root.on("agent/created", veto)
        with pytest.raises(RuntimeError, match="no agents today"):
            r.agent("a", persona="Scoped.")
        await r.root.settle()
        assert r.root.agents.list() == []
        assert r.root.sessions.list() == []
        # The key's scope is gone too: the same id works now.
        r.model.reply(text("ok"))
        agent = r.agent("a")
        await run(agent, "hi")
        assert r.model.requests[0].system == f"{IDENT}\n\nGlobal."


async def test_messages_must_be_text_or_messages() -> None:
    async with loop_rig() as r:
        agent = r.agent()
        with pytest.raises(AgentTypeError, match="got int"):
            agent.send(42)  # type: ignore[arg-type]
        with pytest.raises(AgentTypeError, match="got bytes"):
            agent.steer(b"hi")  # type: ignore[arg-type]
        r.model.reply(text("ok"))
        await run(agent, "fine")
        agent.send(Message.user("a message object"))
        r.model.reply(text("ok"))
        await agent.when_idle()
        assert message_texts(r.model.requests[1])[-1] == "a message object"


async def test_an_agent_on_an_existing_session_continues_its_turns() -> None:
    async with loop_rig() as r:
        session = r.root.sessions.create(id="kept", cwd="/project")
        r.model.reply(text("one"), text("two"))
        agent = r.agent("first", session=session)
        assert agent.cwd == "/project"
        await run(agent, "hi")
        await agent.dispose()
        # The session belongs to its creator: it outlives the agent.
        assert r.root.sessions.get("kept") is session
        again = r.agent("second", session=session)
        await run(again, "and again")
        assert [d["turn"] for d in event_data(session, "turn/start")] == [1, 2]
        assert message_texts(r.model.requests[1]) == ["hi", "one", "and again"]
        assert repr(again) == "<LoopAgent 'second' idle>"


async def test_agents_declared_in_the_config() -> None:
    async with Context() as root:
        for part in (SystemPrompt, Llm, Sessions, AgentRegistry, Tools):
            await root.plugin(part)
        model = ScriptedModel(models=["mock"])
        model.install(root)
        config = {
            "agents": [
                {"id": "cfg", "model": "mock", "persona": "On {{model}} in {{cwd}}."}
                | {"cwd": "/srv", "max_tokens": 64},
                {"id": "bare"},
            ]
        }
        await root.plugin(AgentLoop, config)
        assert [a.id for a in root.agents.list()] == ["cfg", "bare"]
        agent = root.agents.get("cfg")
        model.reply(text("ok"))
        await run(agent, "hi")
        (request,) = model.requests
        assert request.system == f"{IDENT}\n\nOn mock in /srv."
        assert request.max_tokens == 64
        assert root.agents.get("bare").model is None


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"agents": [{"id": "a"}, {"id": "a"}]}, "repeated: a"),
        ({"max_parallel_tool_calls": 0}, "greater than 0"),
        ({"agents": [{"id": "a", "max_tokens": 0}]}, "greater than 0"),
        ({"agents": [{"id": ""}]}, "at least 1 character"),
        ({"agents": [{"id": "a", "colour": "red"}]}, "Extra inputs"),
    ],
)
async def test_bad_loop_config_fails_the_plugin(config: dict[str, Any], problem: str) -> None:
    async with loop_rig() as r:
        await r.loop.dispose()
        with pytest.raises(ConfigError, match=problem):
            await r.root.plugin(AgentLoop, config)


async def test_one_factory_at_a_time() -> None:
    async with loop_rig() as r:
        with pytest.raises(AgentError, match="an agent factory is already registered"):
            await r.root.plugin(AgentLoop)


async def test_prompt_variables_without_an_agent_are_none() -> None:
    async with loop_rig() as r:
        assembly = await r.root.system_prompt.assemble()
        assert assembly.variables == {"model": None, "cwd": None}
        agent = r.agent(cwd="/here")
        scoped = await r.root.system_prompt.assemble(r.root.agents.assemble_context_for(agent))
        assert scoped.variables == {"model": "mock", "cwd": "/here"}


async def test_a_turn_that_fails_before_its_first_step_reports_step_0() -> None:
    # Mutant: `self._step = 0` dropped from _turn (the error named the last turn's step).
    async with loop_rig() as r:
        r.model.reply(tool_calls(tool_call("nothing", id="c1")), text("two steps"))
        agent = r.agent()
        await run(agent, "first")
        assert agent.session.last_turn() == 1

        def refuse_turn_two(session: Session, event: SessionEvent) -> None:
            if event.type == "turn/start" and event.data["turn"] == 2:
                raise RuntimeError("no turn two")

        r.root.on("session/event", refuse_turn_two)
        await run(agent, "second")
        (error,) = r.errors
        assert error[:3] == ("a", 2, 0)
