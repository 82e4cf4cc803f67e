"""The in-process driver's children: their session headers and descriptor, what they
inherit from the parent (model, cwd, token limit) and what a request overrides
(model, persona, tool filter), nested depth, ownership by the parent's scope, and
refusals that leave no child behind."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from dsh.testing import Mark, Wait, run_turn, tool_call, tool_calls
from dsh_llm import BlockStart, TextDelta
from dsh_subagent import SubagentDepthError, SubagentRequest, delegation_depth
from dsh_subagent_inprocess import DESCRIPTOR_EVENT, InProcessProvider, _driver
from dsh_system_prompt import render_prompt
from dsh_tools import ToolRestrictionError, ToolTypeError
from tests.plugins.subagent_support import Rig, delegate_tool, subagent_runtime
from tests.plugins.tools.tools_support import make_tool
from tests.support import event_data, event_types

pytestmark = pytest.mark.anyio

PARENT_PERSONA = "You are the parent."
CHILD_PERSONA = "You are the child."


def live(rig: Rig) -> tuple[list[str], list[str]]:
    """The ids of the live agents and of the sessions in the store."""
    return [a.id for a in rig.root.agents.list()], [s.id for s in rig.root.sessions.list()]


async def test_a_child_session_header_names_its_parent() -> None:
    async with subagent_runtime("child answer") as rig:
        run = await rig.start("spawn", "look around")
        child = run.agent
        assert (await run.result).output == "child answer"
        assert run.id == child.id
        assert child.id.startswith("spawn-")
        assert rig.root.agents.get(child.id) is child
        assert dict(child.session.header.meta) == {
            "agent": child.id,
            "model": "scripted",
            "parent_session": rig.parent.session.id,
            "origin": "subagent",
            "delegation_depth": 1,
            "seed_length": 0,
        }
        assert child.session.id != rig.parent.session.id
        assert rig.root.sessions.get(child.session.id) is child.session  # joined the store


async def test_the_descriptor_is_recorded_in_the_childs_first_turn() -> None:
    async with subagent_runtime("first answer", "second answer") as rig:
        run = await rig.start("spawn", "look around")
        child = run.agent
        await run.result
        assert event_types(child.session)[:3] == ["turn/start", DESCRIPTOR_EVENT, "user/message"]
        assert event_data(child.session, DESCRIPTOR_EVENT) == [
            {
                "turn": 1,
                "provider": "spawn",
                "parent_agent": "main",
                "parent_session": rig.parent.session.id,
            }
        ]
        await run_turn(child, "and again")  # later turns record no descriptor
        assert len(event_data(child.session, DESCRIPTOR_EVENT)) == 1


async def test_a_child_inherits_model_cwd_and_token_limit(tmp_path: Path) -> None:
    core = {"agents": [{"id": "main", "cwd": str(tmp_path), "max_tokens": 77}]}
    async with subagent_runtime("ok", core=core) as rig:
        run = await rig.start()
        child = run.agent
        await run.result
        assert (child.model, child.cwd, child.max_tokens) == ("scripted", str(tmp_path), 77)
        [request] = rig.requests_of(child.session)
        assert (request.model, request.max_tokens) == ("scripted", 77)


async def test_a_request_overrides_the_model() -> None:
    async with subagent_runtime("ok", models=("scripted", "other")) as rig:
        run = await rig.start(model="other")
        child = run.agent
        await run.result
        assert child.model == "other"
        assert child.session.header.meta["model"] == "other"
        assert [r.model for r in rig.requests_of(child.session)] == ["other"]
        assert rig.parent.model == "scripted"


async def test_a_persona_shadows_the_deployment_persona_for_the_child() -> None:
    async with subagent_runtime("ok", "ok", core={"persona": PARENT_PERSONA}) as rig:
        shadowed = await rig.start(persona=CHILD_PERSONA)
        plain = await rig.start()
        await shadowed.result
        await plain.result
        [request] = rig.requests_of(shadowed.agent.session)
        assert request.system is not None
        assert CHILD_PERSONA in request.system
        assert PARENT_PERSONA not in request.system
        [request] = rig.requests_of(plain.agent.session)
        assert request.system is not None
        assert PARENT_PERSONA in request.system  # no persona: the deployment's
        assemble_context = rig.root.agents.assemble_context_for(rig.parent)
        parent_prompt = render_prompt(await rig.root.system_prompt.assemble(assemble_context))
        assert PARENT_PERSONA in parent_prompt
        assert CHILD_PERSONA not in parent_prompt


@pytest.mark.parametrize(
    ("tool_filter", "visible"),
    [({"allow": ["alpha"]}, ["alpha"]), ({"deny": ["alpha"]}, ["beta"])],
    ids=["allow", "deny"],
)
async def test_a_tool_filter_restricts_the_childs_tools(
    tool_filter: dict[str, list[str]], visible: list[str]
) -> None:
    hidden = ({"alpha", "beta"} - set(visible)).pop()
    async with subagent_runtime(tool_calls(tool_call(hidden)), "done") as rig:
        rig.root.tools.register(make_tool("alpha"))
        rig.root.tools.register(make_tool("beta"))
        run = await rig.start(tool_filter=tool_filter)
        child = run.agent
        assert (await run.result).stop_reason == "completed"
        first, _ = rig.requests_of(child.session)
        assert [t.name for t in first.tools] == visible
        # Hidden from execution too, not only from the schemas.
        [result] = event_data(child.session, "tool/result")
        assert result["is_error"] is True
        assert result["name"] == hidden
        # The parent keeps every tool.
        assemble_context = rig.root.agents.assemble_context_for(rig.parent)
        assembly = await rig.root.system_prompt.assemble(assemble_context)
        assert [t.name for t in assembly.tools] == ["alpha", "beta"]


@pytest.mark.parametrize(
    ("tool_filter", "error", "message"),
    [
        (
            {"allow": ["alpha", "nope"]},
            ToolRestrictionError,
            'tools.restrict() names unknown global tool "nope"; known global tools: alpha',
        ),
        (
            {"deny": ["nope", "gone"]},
            ToolRestrictionError,
            'tools.restrict() names unknown global tools "nope", "gone"; known global tools: alpha',
        ),
        (
            {"allow": "alpha"},
            ToolTypeError,
            "tools.restrict() allow= must be a list of tool names, got str",
        ),
        (
            {},
            ToolRestrictionError,
            "tools.restrict() without allow= and with no names to deny is a no-op",
        ),
    ],
    ids=["unknown-allowed", "unknown-denied", "not-a-list", "empty"],
)
async def test_a_tool_filter_naming_unknown_tools_leaves_no_child(
    tool_filter: dict[str, Any], error: type[Exception], message: str
) -> None:
    # tools.restrict names the problem (unknown tools, a name list that is not a list,
    # nothing to filter); the child it was meant for is gone before the error arrives.
    async with subagent_runtime() as rig:
        rig.root.tools.register(make_tool("alpha"))
        before = live(rig)
        effects = len(rig.parent.ctx.fiber._effects)
        pre_step = len(rig.root.events.event("agent/pre-step").listeners())
        started: list[Any] = []
        rig.root.on("subagent/start", started.append)
        with pytest.raises(error) as caught:
            await rig.start(tool_filter=tool_filter)
        assert str(caught.value).startswith(message)
        assert live(rig) == before
        assert started == []
        assert len(rig.parent.ctx.fiber._effects) == effects
        assert len(rig.root.events.event("agent/pre-step").listeners()) == pre_step
        assert rig.model.requests == []


async def test_delegation_depth_counts_across_nested_children() -> None:
    async with subagent_runtime("child answer", "grandchild answer") as rig:
        run = await rig.start(max_depth=1)  # depth 1 under max_depth 1: allowed
        child = run.agent
        await run.result
        assert delegation_depth(child) == 1
        subagents = rig.subagents
        before = live(rig)
        with pytest.raises(SubagentDepthError, match=r"^subagent depth 2 exceeds maxDepth 1$"):
            await subagents.start("spawn", SubagentRequest("deeper", child, max_depth=1))
        assert live(rig) == before
        deeper = await subagents.start("spawn", SubagentRequest("deeper", child, max_depth=2))
        grandchild = deeper.agent
        assert (await deeper.result).output == "grandchild answer"
        assert delegation_depth(grandchild) == 2
        assert grandchild.session.header.meta["parent_session"] == child.session.id
        assert event_data(grandchild.session, DESCRIPTOR_EVENT)[0]["parent_agent"] == child.id
        # The grandchild is owned by the child's scope.
        await child.dispose()
        assert rig.root.agents.get(grandchild.id) is None


async def test_a_grandchild_over_max_depth_is_an_error_result_of_the_childs_tool() -> None:
    delegate = {"provider": "spawn", "prompt": "dig", "max_depth": 1}
    async with subagent_runtime(
        tool_calls(tool_call("delegate", delegate)),  # the parent delegates (depth 1)
        tool_calls(tool_call("delegate", delegate)),  # the child tries (depth 2)
        "child answer",
        "parent answer",
    ) as rig:
        seen, _ = delegate_tool(rig.root)
        assert await run_turn(rig.parent, "go") == {"kind": "completed"}
        [run] = seen.runs  # no grandchild started
        [refused] = event_data(run.agent.session, "tool/result")
        assert refused["content"] == "Error: subagent depth 2 exceeds maxDepth 1"
        assert refused["code"] == "SUBAGENT_DEPTH"
        [answered] = event_data(rig.parent.session, "tool/result")
        assert answered["content"] == "child answer"
        assert live(rig)[0] == ["main"]  # the tool disposed its child


async def test_disposing_the_parent_disposes_its_children() -> None:
    streaming, never = anyio.Event(), anyio.Event()
    reply = [BlockStart(0, "text"), TextDelta(0, "half"), Mark(streaming), Wait(never)]
    async with subagent_runtime("settled child", reply) as rig:
        idle = await rig.start()
        await idle.result  # it has answered; it lives on until its parent goes
        busy = await rig.start()
        await streaming.wait()
        assert live(rig)[0] == ["main", idle.agent.id, busy.agent.id]
        await rig.parent.dispose()
        assert rig.root.agents.list() == []
        assert rig.root.sessions.list() == []
        result = await busy.result
        assert (result.stop_reason, result.output) == ("aborted", "half")
        assert result.diagnostic == "the subagent was disposed before its run ended"
        assert (await idle.result).output == "settled child"


async def test_a_colliding_child_id_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    taken, free = uuid.UUID(int=0xAAAAAAAA << 96), uuid.UUID(int=0xBBBBBBBB << 96)
    scripted = [taken, free]

    def uuid4() -> uuid.UUID:
        return scripted.pop(0) if scripted else uuid.uuid4()

    async with subagent_runtime("ok") as rig:
        rig.root.agents.create("spawn-aaaaaaaa", model="scripted")
        monkeypatch.setattr(_driver, "uuid", SimpleNamespace(uuid4=uuid4))
        run = await rig.start()
        assert run.id == "spawn-bbbbbbbb"
        await run.result


async def test_the_provider_supports_every_capability() -> None:
    provider = InProcessProvider("solo", inherits_parent_context=True)
    assert provider.capabilities == frozenset({"persona", "tool_filter", "depth_limit"})
    assert (provider.name, provider.inherits_parent_context) == ("solo", True)
    assert repr(provider) == "<InProcessProvider 'solo'>"
