"""Plan mode: read-only tools enforced at execution, the section, exit_plan_mode's
question, /plan, disposal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from dsh import Context
from dsh.testing import ScriptedModel, run_turn, text, tool_call, tool_calls
from dsh_agent import assemble_context_for
from dsh_agent_core import AgentCore
from dsh_approval import Approval, ApprovalRequest
from dsh_plan_mode import EXIT_TOOL, SECTION, SECTION_TEXT, PlanMode
from dsh_tools import Tool, ToolCall

pytestmark = pytest.mark.anyio

PLAN = "1. Read main.py\n2. Fix the bug\n3. Run the tests"


class PathArgs(BaseModel):
    path: str


@dataclass
class Rig:
    root: Context
    model: ScriptedModel
    writes: list[str]
    asked: list[ApprovalRequest]
    answers: list[bool]

    @property
    def agent(self) -> Any:
        return self.root.agents.list()[0]

    async def tool_names(self) -> list[str]:
        assembly = await self.root.system_prompt.assemble(assemble_context_for(self.agent))
        return [t.name for t in assembly.tools]

    async def sections(self) -> list[str]:
        assembly = await self.root.system_prompt.assemble(assemble_context_for(self.agent))
        return [s.name for s in assembly.sections]


@asynccontextmanager
async def rig(*, approval: bool = True) -> AsyncIterator[Rig]:
    async with Context() as root:
        model = ScriptedModel()
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        writes: list[str] = []

        async def write(args: PathArgs, call: ToolCall) -> str:
            writes.append(args.path)
            return "written"

        async def read(args: PathArgs, call: ToolCall) -> str:
            return f"text of {args.path}"

        root.tools.register(
            Tool(name="write", description="Write.", parameters=PathArgs, execute=write)
        )
        root.tools.register(
            Tool(name="read", description="Read.", parameters=PathArgs, execute=read)
        )
        asked: list[ApprovalRequest] = []
        answers: list[bool] = []
        if approval:
            await root.plugin(Approval, {"policy": "allow"})

            def respond(request: ApprovalRequest) -> bool:
                asked.append(request)
                return answers.pop(0)

            root.approval.set_responder(respond)
        await root.plugin(PlanMode)
        yield Rig(root, model, writes, asked, answers)


async def plan_command(r: Rig, arguments: str = "") -> list[str]:
    replies: list[str] = []
    sent: list[str] = []

    async def send(message: str) -> None:
        sent.append(message)
        await run_turn(r.agent, message)

    assert await r.root.slash_commands.dispatch(
        f"/plan {arguments}", agent=r.agent, reply=replies.append, send=send, frontend="test"
    )
    return replies + [f"sent: {m}" for m in sent]


async def test_plan_mode_refuses_a_forced_write_whatever_the_model_sends() -> None:
    async with rig() as r:
        assert await r.tool_names() == ["read", "write"]
        assert await plan_command(r) == [
            "plan mode: on (read-only tools until you approve a plan; /plan off leaves)"
        ]
        assert r.root.plan_mode.active(r.agent)
        assert await r.tool_names() == [EXIT_TOOL, "read"]
        assert SECTION in await r.sections()
        # The model calls write anyway (and a tool that does not exist at all).
        r.model.reply(
            tool_calls(
                tool_call("write", {"path": "main.py"}),
                tool_call("rm_rf", {}),
                tool_call("read", {"path": "main.py"}),
            ),
            text("done"),
        )
        assert await run_turn(r.agent, "fix it") == {"kind": "completed"}
        assert r.writes == []
        results = [e.data for e in r.agent.session.events if e.type == "tool/result"]
        assert [(d["name"], d["is_error"], d.get("code")) for d in results] == [
            ("write", True, "PLAN_MODE"),
            ("rm_rf", True, "PLAN_MODE"),
            ("read", False, None),
        ]
        assert results[0]["content"] == (
            'Error: plan mode: "write" cannot run until the user approves a plan; available '
            "now: read, exit_plan_mode. Call exit_plan_mode with your plan."
        )
        # What the model was sent: only the read-only tools and the section.
        request = r.model.requests[0]
        assert [t.name for t in request.tools] == [EXIT_TOOL, "read"]
        assert SECTION_TEXT in request.system


async def test_an_approved_plan_gives_the_tools_back_and_is_the_next_user_message() -> None:
    async with rig() as r:
        changes: list[tuple[str, bool]] = []
        r.root.on("plan-mode/change", lambda agent, active: changes.append((agent.id, active)))
        await plan_command(r)
        r.answers.append(True)
        r.model.reply(
            tool_calls(tool_call(EXIT_TOOL, {"plan": PLAN})),
            tool_calls(tool_call("write", {"path": "main.py"})),
            text("all done"),
        )
        assert await run_turn(r.agent, "fix the bug") == {"kind": "completed"}
        (request,) = r.asked
        assert request.kind == "plan"
        assert request.always_ask
        assert request.detail == PLAN
        assert request.title == f"carrying out this plan\n\n{PLAN}\n\n(plan mode ends)"
        assert r.writes == ["main.py"]
        second = r.model.requests[1]
        assert second.messages[-1].role == "user"
        assert second.messages[-1].text == PLAN
        assert [t.name for t in second.tools] == ["read", "write"]
        assert SECTION_TEXT not in second.system
        assert not r.root.plan_mode.active(r.agent)
        assert changes == [("main", True), ("main", False)]


async def test_a_declined_plan_stays_in_plan_mode() -> None:
    async with rig() as r:
        await plan_command(r)
        r.answers.append(False)
        r.model.reply(
            tool_calls(tool_call(EXIT_TOOL, {"plan": PLAN})),
            tool_calls(tool_call("write", {"path": "x"})),
            text("what should change?"),
        )
        assert await run_turn(r.agent, "go") == {"kind": "completed"}
        results = [e.data for e in r.agent.session.events if e.type == "tool/result"]
        assert results[0]["content"].startswith("The user did not approve the plan")
        assert results[1]["code"] == "PLAN_MODE"
        assert r.writes == []
        assert r.root.plan_mode.active(r.agent)


async def test_without_approval_nobody_can_approve() -> None:
    async with rig(approval=False) as r:
        await plan_command(r)
        r.model.reply(tool_calls(tool_call(EXIT_TOOL, {"plan": PLAN})), text("stuck"))
        await run_turn(r.agent, "go")
        (result,) = [e.data for e in r.agent.session.events if e.type == "tool/result"]
        assert result["code"] == "PLAN_MODE"
        assert "no approval service" in result["content"]
        assert r.root.plan_mode.active(r.agent)


async def test_the_plan_command() -> None:
    async with rig() as r:
        assert await plan_command(r, "off") == ["plan mode was not on"]
        r.model.reply(text("a plan, soon"))
        assert await plan_command(r, "refactor the parser") == [
            "plan mode: on (read-only tools until you approve a plan; /plan off leaves)",
            "sent: refactor the parser",
        ]
        assert r.model.requests[-1].messages[-1].text == "refactor the parser"
        assert [t.name for t in r.model.requests[-1].tools] == [EXIT_TOOL, "read"]
        assert await plan_command(r) == ["plan mode is already on (/plan off leaves)"]
        r.model.reply(text("again"))
        assert await plan_command(r, "more") == ["sent: more"]
        assert await plan_command(r, "off") == ["plan mode: off"]
        assert await r.tool_names() == ["read", "write"]
        assert not r.root.plan_mode.leave(r.agent)
        assert r.root.plan_mode.enter(r.agent)
        assert not r.root.plan_mode.enter(r.agent)


async def test_disposal_leaves_plan_mode_and_removes_everything() -> None:
    async with rig() as r:
        await plan_command(r)
        fiber = r.root.plan_mode.home_ctx.fiber
        await fiber.dispose()
        assert r.root.get("plan_mode") is None
        assert r.root.slash_commands.get("plan") is None
        assert await r.tool_names() == ["read", "write"]
        assert SECTION not in await r.sections()


async def test_an_agent_disposed_in_plan_mode_is_forgotten() -> None:
    async with rig() as r:
        plan_mode: PlanMode = r.root.plan_mode
        other = r.root.agents.create("other", model="scripted")
        assert plan_mode.enter(other)
        await other.dispose()
        assert not plan_mode.active(other)


async def test_plan_mode_refuses_the_agents_own_tools_too() -> None:
    async with rig() as r:
        deleted: list[str] = []

        async def delete(args: PathArgs, call: ToolCall) -> str:
            deleted.append(args.path)
            return "deleted"

        # A tool registered in the agent's own scope, before and after plan mode starts.
        r.agent.ctx.tools.register(
            Tool(name="delete", description="Delete.", parameters=PathArgs, execute=delete)
        )
        assert await r.tool_names() == ["delete", "read", "write"]
        await plan_command(r)
        r.agent.ctx.tools.register(
            Tool(name="shred", description="Shred.", parameters=PathArgs, execute=delete)
        )
        assert await r.tool_names() == [EXIT_TOOL, "read"]
        r.model.reply(
            tool_calls(tool_call("delete", {"path": "main.py"}), tool_call("shred", {"path": "a"})),
            text("done"),
        )
        assert await run_turn(r.agent, "clean up") == {"kind": "completed"}
        assert deleted == []
        results = [e.data for e in r.agent.session.events if e.type == "tool/result"]
        assert [(d["name"], d.get("code")) for d in results] == [
            ("delete", "PLAN_MODE"),
            ("shred", "PLAN_MODE"),
        ]
        assert r.root.plan_mode.leave(r.agent)
        assert await r.tool_names() == ["delete", "read", "shred", "write"]
