"""Compaction end to end on a scripted model: the threshold, the summary request, the
checkpoint, the compacted history, the context-length retry, failed summaries,
pruning, resume and a crash during compaction."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import anyio
import pytest

from dsh.testing import (
    Mark,
    Wait,
    capture_logs,
    failure,
    run_turn,
    text,
    tool_call,
    tool_calls,
    until,
)
from dsh_compaction import CHECKPOINT_EVENT, INSTRUCTION, NOTHING_TO_COMPACT, summary_message
from dsh_llm import Message, ToolResultBlock
from tests.plugins.compaction.compaction_support import (
    BIG,
    COMPLETED,
    MODEL,
    PRUNE,
    SUMMARY_MAX,
    A,
    B,
    Rig,
    answer,
    first_seq,
    is_summary,
    rig,
    said,
)
from tests.support import ANSWERED_STEP, cancelled_while_streaming, event_data, event_types

pytestmark = pytest.mark.anyio


async def two_turns(r: Rig, second: tuple[int, ...] = BIG) -> None:
    """Turns 1 (``A``) and 2 (``B``); the second reports ``second`` as its usage."""
    r.model.reply(answer("one"), answer("two", second))
    assert await run_turn(r.agent, A) == COMPLETED
    assert await run_turn(r.agent, B) == COMPLETED


# -- the threshold -------------------------------------------------------------------------


async def test_past_the_threshold_the_next_request_carries_the_summary_and_the_kept_turns() -> None:
    async with rig() as r:
        await two_turns(r)
        r.model.reply("SUMMARY", answer("three"))
        assert await run_turn(r.agent, "c") == COMPLETED
        summary_request, third = r.model.requests[2:]
        # The older history, then the instruction, to the same model, without tools.
        assert summary_request.messages == (
            Message.user(A),
            said("one"),
            Message.user(INSTRUCTION),
        )
        assert summary_request.model == MODEL
        assert summary_request.tools == ()
        assert summary_request.system is None
        assert summary_request.max_tokens == SUMMARY_MAX
        # The request of turn 3: the summary, then turn 2 and turn 3 only.
        assert third.messages == (
            summary_message("SUMMARY"),
            Message.user(B),
            said("two"),
            Message.user("c"),
        )
        assert third.messages[0].text.startswith("This conversation was compacted")
        assert "<compacted-summary>\nSUMMARY\n</compacted-summary>" in third.messages[0].text
        session = r.agent.session
        (checkpoint,) = event_data(session, CHECKPOINT_EVENT)
        assert checkpoint == {
            "summary": "SUMMARY",
            "first_kept_seq": first_seq(session, "turn/start", turn=2),
        }
        # Checked before the request: after turn 3's message, before its step.
        kinds = event_types(session)
        at = kinds.index(CHECKPOINT_EVENT)
        assert kinds[at - 2 : at + 2] == [
            "turn/start",
            "user/message",
            CHECKPOINT_EVENT,
            "step/start",
        ]
        # The log keeps everything.
        assert session.derive_messages() == [
            Message.user(A),
            said("one"),
            Message.user(B),
            said("two"),
            Message.user("c"),
            said("three"),
        ]
        # The next turn goes on from the checkpoint (its last step's prompt was small).
        r.model.reply(answer("four"))
        assert await run_turn(r.agent, "d") == COMPLETED
        assert r.model.requests[-1].messages == (*third.messages, said("three"), Message.user("d"))
        assert len(r.summary_requests()) == 1


async def test_a_server_reporting_no_usage_is_compacted_on_the_loops_estimate() -> None:
    async with rig() as r:
        r.model.respond = lambda request: "SUMMARY" if is_summary(request) else "ok"
        # A window of 1,000 tokens: about 4,000 bytes of request pass the threshold.
        turns = 0
        while not event_data(r.agent.session, CHECKPOINT_EVENT):
            turns += 1
            assert turns < 20
            assert await run_turn(r.agent, A) == COMPLETED
        events = [e for e in r.agent.session.events if e.type in ("usage/step", CHECKPOINT_EVENT)]
        assert all(e.data["estimated"] for e in events[:-2])
        assert events[-2].type == CHECKPOINT_EVENT
        # Compacted once an estimate passed the threshold (800), before the next step.
        sizes = [e.data["usage"]["input_tokens"] for e in events[:-2]]
        assert len(sizes) == turns - 1 > 1
        assert max(sizes[:-1]) <= 800 < sizes[-1]
        assert events[-1].data["usage"]["input_tokens"] < sizes[-1]
        assert r.turn_requests()[-1].messages[0] == summary_message("SUMMARY")


async def test_a_prompt_at_the_threshold_is_not_compacted() -> None:
    async with rig() as r:
        await two_turns(r, second=(600, 5, 100, 100))  # 800 tokens: not past 0.8 x 1000
        r.model.reply(answer("three"))
        assert await run_turn(r.agent, "c") == COMPLETED
        assert r.summary_requests() == []
        assert len(r.model.requests[-1].messages) == 5


async def test_the_threshold_is_checked_between_the_steps_of_a_turn() -> None:
    async with rig() as r:
        r.model.reply(answer("one"))
        assert await run_turn(r.agent, A) == COMPLETED
        r.model.reply(
            tool_calls(tool_call("echo", {"text": "hi"}), usage=BIG), "SUMMARY", answer("done")
        )
        assert await run_turn(r.agent, B) == COMPLETED
        step_one, summary_request, step_two = r.model.requests[1:]
        assert summary_request.messages == (Message.user(A), said("one"), Message.user(INSTRUCTION))
        # Step 2 of turn 2: the summary, then the whole turn so far.
        assert step_two.step == 2
        assert step_two.messages[0] == summary_message("SUMMARY")
        assert step_two.messages[1] == Message.user(B)
        assert step_two.messages[1:] == tuple(r.agent.session.derive_messages()[2:5])
        assert [m.role for m in step_two.messages] == ["user", "user", "assistant", "tool"]
        assert len(step_one.messages) == 3


async def test_nothing_older_than_the_kept_turns_means_no_summary() -> None:
    async with rig() as r:
        r.model.reply(answer("one", BIG), answer("two"))
        assert await run_turn(r.agent, "short") == COMPLETED
        assert await run_turn(r.agent, "again") == COMPLETED
        assert r.summary_requests() == []
        assert event_data(r.agent.session, CHECKPOINT_EVENT) == []


async def test_a_second_compaction_summarises_the_first_summary_too() -> None:
    async with rig() as r:
        await two_turns(r)
        r.model.reply("FIRST", answer("three", BIG))
        assert await run_turn(r.agent, "c" * 100) == COMPLETED
        r.model.reply("SECOND", answer("four"))
        # Turn 4 and turn 3 fit among the kept turns; turn 2 no longer does.
        assert await run_turn(r.agent, "d" * 300) == COMPLETED
        _, second = r.summary_requests()
        assert second.messages == (
            summary_message("FIRST"),
            Message.user(B),
            said("two"),
            Message.user(INSTRUCTION),
        )
        assert r.model.requests[-1].messages == (
            summary_message("SECOND"),
            Message.user("c" * 100),
            said("three"),
            Message.user("d" * 300),
        )
        session = r.agent.session
        assert [c["first_kept_seq"] for c in event_data(session, CHECKPOINT_EVENT)] == [
            first_seq(session, "turn/start", turn=2),
            first_seq(session, "turn/start", turn=3),
        ]


# -- the context-length retry ----------------------------------------------------------------


async def test_a_context_length_refusal_compacts_and_retries_once_in_a_new_step() -> None:
    async with rig() as r:
        await two_turns(r, second=(10, 5))
        r.model.reply(failure("prompt too long", "CONTEXT_LENGTH"), "SUMMARY", answer("three"))
        assert await run_turn(r.agent, "c") == COMPLETED
        refused, summary_request, retried = r.model.requests[2:]
        assert len(refused.messages) == 5
        assert summary_request.messages[-1] == Message.user(INSTRUCTION)
        assert (refused.step, retried.step) == (1, 2)
        assert retried.messages == (
            summary_message("SUMMARY"),
            Message.user(B),
            said("two"),
            Message.user("c"),
        )
        session = r.agent.session
        turn3 = event_types(session)[first_seq(session, "turn/start", turn=3) :]
        assert [k for k in turn3 if k != "assistant/chunk"] == [
            "turn/start",
            "user/message",
            "step/start",
            CHECKPOINT_EVENT,
            "step/end",
            *ANSWERED_STEP,
            "turn/end",
        ]


async def test_a_second_context_length_refusal_fails_the_turn() -> None:
    async with rig() as r:
        await two_turns(r, second=(10, 5))
        r.model.reply(
            failure("prompt too long", "CONTEXT_LENGTH"),
            "SUMMARY",
            failure("still too long", "CONTEXT_LENGTH"),
        )
        reason = await run_turn(r.agent, "c")
        assert reason == {"kind": "error", "message": "still too long", "code": "CONTEXT_LENGTH"}
        assert len(r.summary_requests()) == 1
        assert len(r.model.requests) == 5


async def test_a_context_length_refusal_with_nothing_to_compact_fails_the_turn() -> None:
    async with rig() as r:
        r.model.reply(failure("prompt too long", "CONTEXT_LENGTH"))
        reason = await run_turn(r.agent, "hi")
        assert reason == {"kind": "error", "message": "prompt too long", "code": "CONTEXT_LENGTH"}
        assert len(r.model.requests) == 1


async def test_other_failures_are_not_retried() -> None:
    async with rig() as r:
        await two_turns(r, second=(10, 5))
        r.model.reply(failure("overloaded", "SERVER_ERROR"))
        reason = await run_turn(r.agent, "c")
        assert reason == {"kind": "error", "message": "overloaded", "code": "SERVER_ERROR"}
        assert r.summary_requests() == []


# -- failed summaries ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("summary", "logged"),
    [
        (failure("boom", "SERVER_ERROR"), "the summary request failed: boom (SERVER_ERROR)"),
        (text("  \n "), "the model returned an empty summary"),
    ],
    ids=["error", "empty"],
)
async def test_a_failed_or_empty_summary_logs_a_warning_and_the_turn_goes_on(
    summary: list[object], logged: str
) -> None:
    async with rig() as r:
        await two_turns(r)
        r.model.reply(summary, answer("three"))
        with capture_logs("dsh.compaction") as logs:
            assert await run_turn(r.agent, "c") == COMPLETED
        session = r.agent.session
        assert logs.messages(logging.WARNING) == [
            f"compaction of session {session.id} failed: {logged}; the history is unchanged"
        ]
        assert event_data(session, CHECKPOINT_EVENT) == []
        # The old history, whole.
        assert r.model.requests[-1].messages == tuple(session.derive_messages()[:-1])


async def test_cancelling_the_turn_during_the_summary_writes_no_checkpoint() -> None:
    async with rig() as r:
        await two_turns(r)
        await cancelled_while_streaming(r.model, r.agent, "c")
        session = r.agent.session
        assert session.turn_end(3) == {"kind": "aborted", "reason": "user"}
        assert event_data(session, CHECKPOINT_EVENT) == []
        # The lock was let go: the next turn compacts.
        r.model.reply("SUMMARY", answer("four"))
        assert await run_turn(r.agent, "d") == COMPLETED
        assert r.model.requests[-1].messages[0] == summary_message("SUMMARY")


# -- pruning -------------------------------------------------------------------------------


async def test_long_tool_results_of_earlier_turns_are_cut_in_requests_only() -> None:
    long = "x" * 300 + "y" * 300
    async with rig() as r:
        r.model.reply(tool_calls(tool_call("echo", {"text": long})), answer("done"))
        assert await run_turn(r.agent, "echo it") == COMPLETED
        # In its own turn the result goes whole.
        (result,) = r.model.requests[1].messages[-1].content
        assert isinstance(result, ToolResultBlock)
        assert result.content == long
        r.model.reply(answer("again"))
        assert await run_turn(r.agent, "next") == COMPLETED
        (pruned,) = r.model.requests[2].messages[2].content
        assert isinstance(pruned, ToolResultBlock)
        half = PRUNE // 2
        marker = f"\n[... {len(long) - 2 * half:,} characters of this tool result cut here ...]\n"
        assert pruned.content == "x" * half + marker + "y" * half
        assert pruned.tool_call_id == result.tool_call_id
        # The log keeps the whole result.
        (logged,) = event_data(r.agent.session, "tool/result")
        assert logged["content"] == long
        assert r.agent.session.derive_messages()[2].content == (result,)


async def test_without_a_prune_limit_tool_results_go_whole() -> None:
    long = "z" * 500
    config = {"context_window": 1000, "summary_max_tokens": 100, "prune_tool_results_over": None}
    async with rig(config) as r:
        r.model.reply(tool_calls(tool_call("echo", {"text": long})), answer("done"), answer("ok"))
        assert await run_turn(r.agent, "echo it") == COMPLETED
        assert await run_turn(r.agent, "next") == COMPLETED
        (result,) = r.model.requests[2].messages[2].content
        assert isinstance(result, ToolResultBlock)
        assert result.content == long


# -- resume and crashes --------------------------------------------------------------------


async def test_resume_after_a_checkpoint_derives_the_compacted_history(tmp_path: Path) -> None:
    async with rig(store=tmp_path) as r:
        await two_turns(r)
        r.model.reply("SUMMARY", answer("three"))
        assert await run_turn(r.agent, "c") == COMPLETED
        session_id = r.agent.session.id
        before = r.compaction.history(r.agent.session)
        everything = r.agent.session.derive_messages()
    assert before[0] == summary_message("SUMMARY")
    async with rig(store=tmp_path) as r:
        agent = await r.root.agents.resume(session_id)
        assert r.compaction.history(agent.session) == before
        assert agent.session.derive_messages() == everything
        r.model.reply(answer("four"))
        assert await run_turn(agent, "d") == COMPLETED
        assert r.model.requests[-1].messages == (*before, Message.user("d"))
        assert r.summary_requests() == []


async def test_a_crash_during_compaction_leaves_the_old_history(tmp_path: Path) -> None:
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    async with rig(store=live) as r:
        await two_turns(r)
        everything = r.agent.session.derive_messages()
        reached, release = anyio.Event(), anyio.Event()
        r.model.reply([Mark(reached), Wait(release), *text("SUMMARY")], answer("three"))
        r.agent.send("c")
        await reached.wait()
        # What is on disk while the summary is being written: what a crash leaves.
        shutil.copytree(live, crashed)
        session_id = r.agent.session.id
        release.set()
        await r.agent.when_idle()
    async with rig(store=crashed) as r:
        agent = await r.root.agents.resume(session_id)
        session = agent.session
        assert session.turn_end(3) == {"kind": "interrupted"}
        assert event_data(session, CHECKPOINT_EVENT) == []
        assert r.compaction.history(session) == everything
        # It compacts again on the next request, from the old history.
        r.model.reply("SUMMARY", answer("four"))
        assert await run_turn(agent, "d") == COMPLETED
        assert r.model.requests[-1].messages[0] == summary_message("SUMMARY")


# -- /compact ------------------------------------------------------------------------------


async def test_compact_reports_nothing_to_compact_on_a_short_history() -> None:
    async with rig() as r:
        assert await r.compaction.compact(r.agent) == NOTHING_TO_COMPACT
        r.model.reply(answer("one"))
        assert await run_turn(r.agent, "hi") == COMPLETED
        assert await r.compaction.compact(r.agent) == NOTHING_TO_COMPACT
        assert r.summary_requests() == []


async def test_compact_summarises_whatever_the_size_and_names_the_turns() -> None:
    async with rig() as r:
        await two_turns(r, second=(10, 5))
        r.model.reply("S" * 40)
        line = await r.compaction.compact(r.agent)
        assert line == "Compacted turn 1 into a summary of about 10 tokens; kept turn 2."
        assert await r.compaction.compact(r.agent) == NOTHING_TO_COMPACT
        r.model.reply(answer("three"))
        assert await run_turn(r.agent, "c") == COMPLETED
        assert r.model.requests[-1].messages == (
            summary_message("S" * 40),
            Message.user(B),
            said("two"),
            Message.user("c"),
        )


async def test_compact_with_no_turn_small_enough_keeps_none() -> None:
    async with rig() as r:
        r.model.reply(answer("one"), answer("two"))
        assert await run_turn(r.agent, "a" * 700) == COMPLETED
        assert await run_turn(r.agent, "b" * 700) == COMPLETED
        r.model.reply("SUM")
        line = await r.compaction.compact(r.agent)
        assert line == "Compacted turns 1-2 into a summary of about 1 token; no turn kept whole."
        session = r.agent.session
        (checkpoint,) = event_data(session, CHECKPOINT_EVENT)
        assert checkpoint["first_kept_seq"] == len(session.events) - 1
        r.model.reply("SUM2")
        assert await r.compaction.compact(r.agent) == NOTHING_TO_COMPACT
        r.model.reply(answer("three"))
        assert await run_turn(r.agent, "c") == COMPLETED
        assert r.model.requests[-1].messages == (summary_message("SUM"), Message.user("c"))


async def test_compact_again_names_the_earlier_summary() -> None:
    async with rig() as r:
        await two_turns(r, second=(10, 5))
        r.model.reply("FIRST")
        await r.compaction.compact(r.agent)
        r.model.reply(answer("three"))
        assert await run_turn(r.agent, "c" * 400) == COMPLETED
        r.model.reply("SECOND")
        line = await r.compaction.compact(r.agent)
        assert line == (
            "Compacted the earlier summary and turn 2 into a summary of about 2 tokens; "
            "kept turn 3."
        )


async def test_a_request_waits_for_a_compact_in_progress_and_does_not_compact_again() -> None:
    async with rig() as r:
        await two_turns(r)  # the last prompt passed the threshold
        reached, release = anyio.Event(), anyio.Event()
        r.model.reply([Mark(reached), Wait(release), *text("SUMMARY")], answer("three"))
        lines: list[str] = []

        async def compact() -> None:
            lines.append(await r.compaction.compact(r.agent))

        async with anyio.create_task_group() as group:
            group.start_soon(compact)
            await reached.wait()
            r.agent.send("c")
            lock = r.compaction._states[r.agent.session].lock
            await until(lambda: lock.statistics().tasks_waiting == 1)
            release.set()
        await r.agent.when_idle()
        assert lines == ["Compacted turn 1 into a summary of about 2 tokens; kept turn 2."]
        assert len(r.summary_requests()) == 1
        assert r.model.requests[-1].messages == (
            summary_message("SUMMARY"),
            Message.user(B),
            said("two"),
            Message.user("c"),
        )


async def test_compact_reports_a_failed_summary() -> None:
    async with rig() as r:
        await two_turns(r, second=(10, 5))
        r.model.reply(failure("boom", "SERVER_ERROR"))
        with capture_logs("dsh.compaction") as logs:
            line = await r.compaction.compact(r.agent)
        assert line == (
            "Compaction failed: the summary request failed: boom (SERVER_ERROR); "
            "the history is unchanged."
        )
        assert len(logs.messages(logging.WARNING)) == 1
        assert event_data(r.agent.session, CHECKPOINT_EVENT) == []


async def test_the_usage_of_the_summary_is_kept_in_the_checkpoint() -> None:
    async with rig() as r:
        await two_turns(r, second=(10, 5))
        r.model.reply(text("SUMMARY", usage=(300, 20)))
        await r.compaction.compact(r.agent)
        (checkpoint,) = event_data(r.agent.session, CHECKPOINT_EVENT)
        assert checkpoint["usage"] == {"input_tokens": 300, "output_tokens": 20}
