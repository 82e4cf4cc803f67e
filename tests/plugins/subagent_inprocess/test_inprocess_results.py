"""How an in-process child's run ends: results that never raise, one per run, with the
stop reason of the child's first turn and a diagnostic when it did not complete; and
the helpers ``result_of`` and ``completed_turns``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from dsh.testing import Mark, Wait, failure, text
from dsh_agent import StepBlocked
from dsh_llm import BlockStart, Message, TextBlock, TextDelta, ToolCallBlock
from dsh_session import Session, SessionHeader
from dsh_subagent import SubagentResult, SubagentRun
from dsh_subagent_inprocess import completed_turns, result_of
from tests.plugins.subagent_support import Rig, subagent_runtime

pytestmark = pytest.mark.anyio

DISPOSED = "the subagent was disposed before its run ended"


def ends(rig: Rig) -> list[tuple[SubagentRun, SubagentResult]]:
    log: list[tuple[SubagentRun, SubagentResult]] = []
    rig.root.on("subagent/end", lambda run, result: log.append((run, result)))
    return log


def half_then_hold() -> tuple[anyio.Event, list[Any]]:
    """A reply that streams ``half`` and then holds; the event is set when it holds."""
    streaming = anyio.Event()
    return streaming, [
        BlockStart(0, "text"),
        TextDelta(0, "half"),
        Mark(streaming),
        Wait(anyio.Event()),
    ]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("all done", SubagentResult("all done", "completed")),
        (
            failure("the model broke", "SERVER_ERROR"),
            SubagentResult("", "error", "the model broke (SERVER_ERROR)"),
        ),
        (
            text("cut sh", finish="max-tokens"),
            SubagentResult("cut sh", "max-tokens", "max-tokens"),
        ),
    ],
    ids=["completed", "error", "max-tokens"],
)
async def test_a_run_ends_with_the_stop_reason_of_the_childs_turn(
    reply: Any, expected: SubagentResult
) -> None:
    async with subagent_runtime(reply) as rig:
        log = ends(rig)
        run = await rig.start()
        result = await run.result  # never raises, whatever the child did
        assert result == expected
        assert await run.result is result
        assert log == [(run, result)]


async def test_a_refused_step_is_a_refusal() -> None:
    async with subagent_runtime() as rig:

        async def refuse(agent: Any, messages: Any, turn: int, step: int, call_next: Any) -> Any:
            if agent is not rig.parent:
                raise StepBlocked("not in this house")
            return await call_next()

        rig.root.on("agent/pre-step", refuse)
        run = await rig.start()
        assert await run.result == SubagentResult("", "refusal", "not in this house")
        assert rig.model.requests == []


async def test_an_unscripted_call_is_an_error_with_its_code() -> None:
    async with subagent_runtime() as rig:
        run = await rig.start()
        result = await run.result
        assert (result.stop_reason, result.output) == ("error", "")
        assert result.diagnostic is not None
        assert result.diagnostic.startswith("model call failed: unscripted model call")
        assert result.diagnostic.endswith("(ADAPTER_ERROR)")


async def test_a_cancelled_child_is_aborted_with_its_partial_answer() -> None:
    streaming, reply = half_then_hold()
    async with subagent_runtime(reply) as rig:
        log = ends(rig)
        run = await rig.start()
        await streaming.wait()
        run.agent.cancel()
        result = await run.result
        assert result == SubagentResult("half", "aborted", "the subagent's turn was cancelled")
        assert log == [(run, result)]
        assert rig.root.agents.get(run.agent.id) is run.agent  # cancelled, not disposed


async def test_a_child_disposed_mid_turn_is_aborted() -> None:
    streaming, reply = half_then_hold()
    async with subagent_runtime(reply) as rig:
        log = ends(rig)
        run = await rig.start()
        await streaming.wait()
        await run.agent.dispose()
        result = await run.result
        assert result == SubagentResult("half", "aborted", DISPOSED)
        assert log == [(run, result)]


async def test_a_child_disposed_before_its_turn_ran_is_aborted() -> None:
    async with subagent_runtime() as rig:
        log = ends(rig)
        run = await rig.start()
        await run.agent.dispose()
        result = await run.result
        assert result == SubagentResult("", "aborted", DISPOSED)
        assert log == [(run, result)]
        assert rig.model.requests == []


# -- result_of and completed_turns -----------------------------------------------------------


def session_of(*turns: tuple[list[Message], Mapping[str, Any] | None]) -> Session:
    """A session with one turn per ``(assistant messages, end reason)``; a reason of
    None leaves that turn open."""
    session = Session(SessionHeader("s", 0.0))
    for number, (messages, reason) in enumerate(turns, start=1):
        session.append("turn/start", {"turn": number})
        session.append(
            "user/message", {"turn": number, "step": 1, "message": Message.user("go").to_json()}
        )
        for message in messages:
            session.append(
                "assistant/message", {"turn": number, "step": 1, "message": message.to_json()}
            )
        if reason is not None:
            session.append("turn/end", {"turn": number, "reason": reason})
    return session


def said(*texts: str) -> Message:
    return Message("assistant", tuple(TextBlock(t) for t in texts))


CALLED = Message("assistant", (ToolCallBlock("c1", "tool", "{}"),))
COMPLETED = {"kind": "completed"}


def test_the_output_is_the_last_assistant_text_after_the_seed() -> None:
    seeded = ([said("seeded answer")], COMPLETED)
    session = session_of(seeded, ([said("early"), CALLED, said("  ")], COMPLETED))
    seed = 4  # the first turn: start, user message, answer, end
    assert result_of(session, 2, seed) == SubagentResult("early", "completed")
    # Text split across blocks is joined; a turn with no text answers "".
    joined = session_of(([said("a", "b")], COMPLETED))
    assert result_of(joined, 1, 0).output == "ab"
    silent = session_of(([said("seeded")], COMPLETED), ([CALLED], COMPLETED))
    assert result_of(silent, 2, 4).output == ""  # never the seed's text


@pytest.mark.parametrize(
    ("reason", "stop", "diagnostic"),
    [
        (None, "aborted", DISPOSED),
        ({"kind": "aborted", "reason": "disposed"}, "aborted", DISPOSED),
        ({"kind": "aborted", "reason": "user"}, "aborted", "the subagent's turn was cancelled"),
        ({"kind": "aborted", "reason": "timeout"}, "aborted", "timeout"),
        ({"kind": "interrupted"}, "aborted", "interrupted"),
        ({"kind": "blocked", "message": "no"}, "refusal", "no"),
        ({"kind": "error", "message": "boom", "code": "X"}, "error", "boom (X)"),
        ({"kind": "error", "code": "X"}, "error", "(X)"),
        ({"kind": "max-tokens"}, "max-tokens", "max-tokens"),
        (COMPLETED, "completed", None),
    ],
)
def test_the_diagnostic_says_why_a_run_did_not_complete(
    reason: Mapping[str, Any] | None, stop: str, diagnostic: str | None
) -> None:
    session = session_of(([said("partial")], reason))
    assert result_of(session, 1, 0) == SubagentResult("partial", stop, diagnostic)  # type: ignore[arg-type]


def test_completed_turns_stop_at_the_last_turn_end() -> None:
    assert completed_turns(Session(SessionHeader("s", 0.0))) == []
    assert completed_turns(session_of(([said("open")], None))) == []
    session = session_of(
        ([said("one")], COMPLETED), ([said("two")], COMPLETED), ([said("three")], None)
    )
    kept = completed_turns(session)
    assert kept == session.events[: len(kept)]
    assert kept[-1].type == "turn/end"
    assert kept[-1].data["turn"] == 2
    assert [e.data["turn"] for e in session.events[len(kept) :]] == [3, 3, 3]
