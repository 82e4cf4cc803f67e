"""Compaction's config, the context window it uses, ``dsh check``, disposal, and the
history index on logs the agent loop does not write (messages outside turns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh import CheckReport, ConfigError, Context, cli
from dsh.testing import run_turn
from dsh_agent import NoModelError
from dsh_compaction import (
    CHECKPOINT_EVENT,
    Compaction,
    History,
    Plan,
    describe,
    message_chars,
    prune,
)
from dsh_llm import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from dsh_session import Session, SessionHeader
from tests.plugins.compaction.compaction_support import (
    BIG,
    COMPLETED,
    CONFIG,
    A,
    B,
    answer,
    rig,
)
from tests.support import EXAMPLES

CODING_EXAMPLE = EXAMPLES / "coding-agent" / "dsh.yml"
#: A turn too long to be kept whole in a window of 4,096 tokens (or less).
LONG = "l" * 3000

pytestmark = pytest.mark.anyio


# -- config --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (
            {"context_window": 4096, "summary_max_tokens": 8192},
            "context_window (4096) is smaller than summary_max_tokens (8192)",
        ),
        ({"retain_ratio": 0.8}, "retain_ratio (0.8) must be below threshold_ratio (0.8)"),
        ({"threshold_ratio": 1.5}, "threshold_ratio"),
        ({"context_window": 0}, "context_window"),
        ({"prune_tool_results_over": 0}, "prune_tool_results_over"),
        ({"window": 1000}, 'did you mean "context_window"?'),
    ],
    ids=["window-below-summary", "retain-over-threshold", "ratio", "zero", "prune", "unknown"],
)
async def test_bad_configs_fail_the_plugin(config: dict[str, Any], problem: str) -> None:
    async with rig(None) as r:
        with pytest.raises(ConfigError, match="compaction") as caught:
            await r.root.plugin(Compaction, config)
        assert problem in str(caught.value)
        assert r.root.get("compaction") is None


async def test_summary_max_tokens_defaults_to_a_quarter_of_the_window_up_to_8192() -> None:
    async with rig({"context_window": 4096}) as r:
        config = r.compaction.config
        assert config.summary_max_tokens is None
        assert [config.summary_tokens(w) for w in (4096, 32_768, 200_000, 3)] == [
            1024,
            8192,
            8192,
            1,
        ]
        r.model.reply(answer("one"), "SUMMARY")
        assert await run_turn(r.agent, LONG) == COMPLETED
        await r.compaction.compact(r.agent)
        assert [q.max_tokens for q in r.summary_requests()] == [1024]
    async with rig({"summary_max_tokens": 300, "context_window": 4096}) as r:
        assert r.compaction.config.summary_tokens(4096) == 300


async def test_a_small_declared_window_gets_a_summary_budget_that_fits() -> None:
    async with rig({}, window=2000) as r:
        assert r.compaction.context_window("m") == 2000
        r.model.reply(answer("one"), "SUMMARY")
        assert await run_turn(r.agent, LONG) == COMPLETED
        await r.compaction.compact(r.agent)
        assert [q.max_tokens for q in r.summary_requests()] == [500]


def test_the_coding_example_checks_with_a_4096_token_window(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DSH_CONTEXT_WINDOW", "4096")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "unused")
    assert cli.main(["check", str(CODING_EXAMPLE)]) == 0
    assert capsys.readouterr().out.startswith(f"{CODING_EXAMPLE}: ok")


async def test_the_adapters_declared_window_is_the_default() -> None:
    async with rig({"summary_max_tokens": 100}, window=1000) as r:
        assert r.compaction.context_window("m") == 1000
        r.model.reply(answer("one"), answer("two", BIG), "SUMMARY", answer("three"))
        for message in (A, B, "c"):
            assert await run_turn(r.agent, message) == COMPLETED
        assert len(r.summary_requests()) == 1


async def test_the_configured_window_wins_over_the_declared_one() -> None:
    async with rig(CONFIG, window=50_000) as r:
        assert r.compaction.context_window("m") == 1000


async def test_no_known_window_fails_the_turn_naming_the_model() -> None:
    async with rig({}) as r:
        reason = await run_turn(r.agent, "hi")
        assert reason is not None
        assert reason["code"] == "CONFIG_INVALID"
        assert 'no context window is known for model "m"' in reason["message"]
        assert "set context_window in the compaction config" in reason["message"]
        assert r.model.requests == []
        with pytest.raises(ConfigError, match="no context window"):
            await r.compaction.compact(r.agent)


async def test_a_declared_window_below_the_summary_budget_is_a_config_error() -> None:
    async with rig({"summary_max_tokens": 100}, window=50) as r:
        reason = await run_turn(r.agent, "hi")
        assert reason is not None
        assert reason["code"] == "CONFIG_INVALID"
        assert "(50 tokens) is smaller than summary_max_tokens (100)" in reason["message"]


async def test_an_agent_without_a_model_is_left_to_the_loop() -> None:
    async with rig() as r:
        bare = r.root.agents.create("bare", model=None)
        reason = await run_turn(bare, "hi")
        assert reason is not None
        assert reason["code"] == "NO_MODEL"
        with pytest.raises(NoModelError, match='agent "bare" has no model'):
            await r.compaction.compact(bare)


async def test_dsh_check_fails_an_agent_whose_window_is_unknown(tmp_path: Path) -> None:
    async with rig({}) as r:
        r.root.agents.create("bare", model=None)
        r.root.agents.create("other", model="m")
        report = CheckReport(tmp_path / "dsh.yml")
        await r.root.serial("deployment/check", report)
        mine = [line for line in report.problems if "compaction" in line]
        assert [line.split(":")[1].strip() for line in mine] == [
            'agent "main"',
            'agent "other"',
        ]
        assert 'no context window is known for model "m"' in mine[0]
        only = CheckReport(tmp_path / "dsh.yml", agent="other")
        await r.root.serial("deployment/check", only)
        assert [line for line in only.problems if "compaction" in line] == mine[1:]
    async with rig() as r:
        report = CheckReport(tmp_path / "dsh.yml")
        await r.root.serial("deployment/check", report)
        assert report.problems == []


# -- disposal ------------------------------------------------------------------------------


async def test_disposal_leaves_no_registration_behind() -> None:
    names = ("agent/request", "agent/request-failed", "session/disposed", "deployment/check")
    async with rig(None) as r:
        root: Context = r.root

        def registrations() -> tuple[object, ...]:
            listeners = tuple(len(root.events.event(n).listeners()) for n in names)
            commands = [c.name for c in root.slash_commands.list()]
            return (root.sessions.event_types(), listeners, root.get("compaction"), commands)

        before = registrations()
        fiber = await root.plugin(Compaction, CONFIG)
        assert CHECKPOINT_EVENT in root.sessions.event_types()
        assert root.slash_commands.get("compact") is not None
        r.model.reply(answer("one"))
        assert await run_turn(r.agent, "hi") == COMPLETED
        compaction: Compaction = root.compaction
        assert compaction.history(r.agent.session)[0] == Message.user("hi")
        await fiber.dispose()
        assert registrations() == before
        assert compaction._states == {}


async def test_a_session_leaving_the_store_is_forgotten() -> None:
    async with rig() as r:
        agent = r.root.agents.create("other", model="m")
        r.model.reply(answer("one"))
        assert await run_turn(agent, "hi") == COMPLETED
        assert agent.session in r.compaction._states
        await agent.dispose()
        assert agent.session not in r.compaction._states


# -- the history index ---------------------------------------------------------------------


def _session() -> Session:
    return Session(SessionHeader("s", 0.0))


def test_messages_outside_turns_are_kept_on_their_own() -> None:
    session = _session()
    session.append("user/message", {"message": Message.user("x" * 800).to_json()})
    session.append("turn/start", {"turn": 1})
    session.append("user/message", {"turn": 1, "step": 1, "message": Message.user("q").to_json()})
    history = History(None)
    history.sync(session)
    assert list(history.messages()) == session.derive_messages()
    assert history.current is not None
    plan = history.plan(100, len(session.events))
    assert plan == Plan(0, 1, 1, (), (1,), False)
    assert describe(plan, "abcd") == (
        "Compacted the earlier messages into a summary of about 1 token; kept turn 1."
    )
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    history.sync(session)
    assert [history.current] == [None]
    assert list(history.messages()) == session.derive_messages()


def test_a_turn_without_an_answer_that_did_not_complete_leaves_nothing() -> None:
    session = _session()
    session.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})  # no start
    session.append("turn/start", {"turn": 1})
    session.append("user/message", {"turn": 1, "step": 1, "message": Message.user("q").to_json()})
    session.append(
        "assistant/message", {"turn": 1, "step": 1, "message": {"role": "assistant", "content": []}}
    )
    session.append(
        "turn/end", {"turn": 1, "reason": {"kind": "error", "message": "x", "code": "X"}}
    )
    history = History(None)
    history.sync(session)
    assert list(history.messages()) == session.derive_messages() == []
    assert history.plan(0, len(session.events)) is None


def test_the_size_counts_what_reaches_the_model() -> None:
    message = Message(
        "assistant",
        (TextBlock("ab"), ReasoningBlock("cde"), ToolCallBlock("id", "tool", '{"x": 1}')),
    )
    assert message_chars(message) == 2 + 3 + 4 + 8
    assert message_chars(Message("tool", (ToolResultBlock("id", "12345"),))) == 5


def test_pruning_keeps_equal_halves_around_a_marker() -> None:
    short = Message("tool", (ToolResultBlock("a", "x" * 10),))
    assert prune(short, 10) is short
    assert prune(short, None) is short
    both = Message("tool", (ToolResultBlock("a", "0123456789", True), ToolResultBlock("b", "ok")))
    cut = prune(both, 5)
    first, second = cut.content
    assert isinstance(first, ToolResultBlock)
    assert first == ToolResultBlock(
        "a", "01\n[... 6 characters of this tool result cut here ...]\n89", True
    )
    assert second == ToolResultBlock("b", "ok")
    (tiny,) = prune(Message("tool", (ToolResultBlock("c", "abc"),)), 1).content
    assert isinstance(tiny, ToolResultBlock)
    assert tiny.content == "\n[... 3 characters of this tool result cut here ...]\n"
