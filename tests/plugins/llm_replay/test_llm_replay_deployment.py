"""End to end from YAML: ``agent-core`` + ``llm-replay`` + a local tool plugin.

The replay file sits next to the deployment and is named relatively, so it must be
resolved against the YAML's directory, not the current one. A two-step turn (a tool
call, then text) is driven through the real agent loop and checked in the session log;
recording that session gives the replay file back. And a live run, recorded with
``record_session``, replays to the same session log.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import dsh_llm as llm
from dsh import Context, DeploymentError, Disposer, load_deployment
from dsh.testing import ScriptedModel, write_deployment
from dsh_agent_core import AgentCore
from dsh_llm_replay import LlmReplay, ReplayAdapter, record_session
from tests.plugins.llm_replay import lookup_tool
from tests.plugins.llm_replay.replay_support import replay_text

pytestmark = pytest.mark.anyio

DEPLOYMENT = """\
- id: core
  name: agent-core
  config:
    model: replay
    persona: "You are replay-agent on {{model}}."
- id: replay
  name: llm-replay
  config:
    file: recordings/run.jsonl
- id: lookup
  name: ./lookup_tool.py
"""

STEP_ONE: list[llm.Chunk] = [
    llm.BlockStart(0, "reasoning"),
    llm.ReasoningDelta(0, "I should look it up."),
    llm.BlockEnd(0),
    llm.BlockStart(1, "text"),
    llm.TextDelta(1, "Let me "),
    llm.TextDelta(1, "look."),
    llm.BlockEnd(1),
    llm.BlockStart(2, "tool-call"),
    llm.ToolCallDelta(2, "call_1", '{"key": ', name="lookup"),
    llm.ToolCallDelta(2, None, '"answer"}'),
    llm.BlockEnd(2),
    llm.UsageChunk(llm.Usage(120, 30)),
    llm.Finish("tool-calls"),
]
STEP_TWO: list[llm.Chunk] = [
    llm.BlockStart(0, "text"),
    llm.TextDelta(0, "The answer "),
    llm.TextDelta(0, "is 42."),
    llm.BlockEnd(0),
    llm.UsageChunk(llm.Usage(180, 8, cache_read_tokens=100)),
    llm.Finish("stop"),
]


def deploy(directory: Path, replay: str) -> Path:
    """The deployment, its replay file (``replay``) and the lookup tool in ``directory``."""
    (directory / "recordings").mkdir()
    (directory / "recordings" / "run.jsonl").write_text(replay, encoding="utf-8")
    shutil.copy(lookup_tool.__file__, directory / "lookup_tool.py")
    return write_deployment(directory, DEPLOYMENT)


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A deployment directory that is not the current directory."""
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    deployment = tmp_path / "deploy"
    deployment.mkdir()
    return deployment


def turn_types(events: list[Any]) -> list[str]:
    """Event types with each run of ``assistant/chunk`` collapsed to ``chunks xN``."""
    out: list[str] = []
    for event in events:
        if event.type == "assistant/chunk" and out and out[-1].startswith("chunks x"):
            out[-1] = f"chunks x{int(out[-1][8:]) + 1}"
        elif event.type == "assistant/chunk":
            out.append("chunks x1")
        else:
            out.append(event.type)
    return out


async def test_a_two_step_turn_replays_through_the_agent_loop(elsewhere: Path) -> None:
    text = replay_text((1, 1, STEP_ONE), (1, 2, STEP_TWO))
    path = deploy(elsewhere, text)
    async with Context() as root:
        deployment = await load_deployment(path, root)
        adapter: ReplayAdapter = deployment.instance.fibers["replay"].instance.adapter
        assert adapter.source == str(elsewhere / "recordings" / "run.jsonl")
        assert root.llm.models() == ["replay"]

        agent = root.agents.get("main")
        agent.send("What is the answer?")
        await agent.when_idle()

        events = agent.session.events
        assert turn_types(events) == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            f"chunks x{len(STEP_ONE)}",
            "assistant/message",
            "usage/step",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            f"chunks x{len(STEP_TWO)}",
            "assistant/message",
            "usage/step",
            "step/end",
            "turn/end",
        ]
        assert agent.session.derive_messages() == [
            llm.Message.user("What is the answer?"),
            llm.Message(
                "assistant",
                (
                    llm.ReasoningBlock("I should look it up."),
                    llm.TextBlock("Let me look."),
                    llm.ToolCallBlock("call_1", "lookup", '{"key": "answer"}'),
                ),
            ),
            llm.Message("tool", (llm.ToolResultBlock("call_1", "value of answer: 42"),)),
            llm.Message("assistant", (llm.TextBlock("The answer is 42."),)),
        ]
        by_type = {e.type: e.data for e in events}
        assert by_type["turn/end"] == {"turn": 1, "reason": {"kind": "completed"}}
        assert by_type["tool/call"]["name"] == "lookup"
        assert by_type["assistant/message"]["usage"] == {
            "input_tokens": 180,
            "output_tokens": 8,
            "cache_read_tokens": 100,
        }
        assert "You are replay-agent on replay." in by_type["request/header"]["header"]["system"]
        assert adapter.unplayed() == []

        # Recording the session gives back the replay file, line for line.
        assert record_session(agent.session) == text

        # A turn that was never recorded ends in error with REPLAY_MISSING.
        agent.send("And again?")
        await agent.when_idle()
        end = agent.session.events[-1]
        assert end.type == "turn/end"
        assert end.data["turn"] == 2
        reason = end.data["reason"]
        assert reason["kind"] == "error"
        assert reason["code"] == "REPLAY_MISSING"
        assert "no recorded stream for turn 2, step 1 in" in reason["message"]

        await deployment.dispose()
        assert root.get("llm") is None


async def test_a_malformed_replay_file_fails_the_deployment(elsewhere: Path) -> None:
    text = replay_text((1, 1, STEP_ONE)) + '{"turn": 1, "step": 1, "chunks": []}\n'
    path = deploy(elsewhere, text)
    replay = elsewhere / "recordings" / "run.jsonl"
    async with Context() as root:
        with pytest.raises(DeploymentError) as caught:
            await load_deployment(path, root)
        message = str(caught.value)
        assert f"{path}:6: entry 'replay'" in message
        assert "ReplayFileError" in message
        assert (
            f"{replay}:2: a second recording for turn 1, step 1 (the first is on line 1)" in message
        )
        assert root.get("llm") is None


def live_reply(request: llm.LlmRequest) -> list[llm.Chunk]:
    """A live model: a tool call first, then an answer quoting the tool result."""
    last = request.messages[-1]
    results = [b for b in last.content if isinstance(b, llm.ToolResultBlock)]
    if results:
        return [
            llm.TextDelta(0, f"It said: {results[0].content}"),
            llm.UsageChunk(llm.Usage(9, 4)),
            llm.Finish("stop"),
        ]
    # Quirks the assembler tolerates: no block-start, the id on the first fragment.
    return [
        llm.ToolCallDelta(0, "c1", '{"key": ', name="lookup"),
        llm.ToolCallDelta(0, None, f'"{last.text}"}}'),
        llm.Finish("tool-calls"),
    ]


def live_model(ctx: Context, config: None) -> Disposer:
    return ScriptedModel(respond=live_reply, models=["live"]).install(ctx)


async def run_agent(
    model_plugin: Any, model_config: Any
) -> tuple[list[str], list[llm.Message], str]:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "live"})
        await root.plugin(lookup_tool)
        await root.plugin(model_plugin, model_config)
        agent = root.agents.get("main")
        agent.send("colour")
        await agent.when_idle()
        session = agent.session
        return turn_types(session.events), session.derive_messages(), record_session(session)


async def test_a_live_run_recorded_replays_the_same(tmp_path: Path) -> None:
    live_types, live_messages, text = await run_agent(live_model, None)
    assert live_messages[-1] == llm.Message(
        "assistant", (llm.TextBlock("It said: value of colour: 42"),)
    )
    assert live_types[-1] == "turn/end"
    path = tmp_path / "live.jsonl"
    path.write_text(text, encoding="utf-8")

    types, messages, again = await run_agent(LlmReplay, {"file": str(path), "models": ["live"]})
    assert types == live_types
    assert messages == live_messages
    assert again == text
