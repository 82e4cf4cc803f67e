"""The approval service: policies, the one responder, require, events, a declined tool."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from dsh import ConfigError, Context, Disposer, Plugin, cli
from dsh_approval import (
    ALWAYS,
    Approval,
    ApprovalDeniedError,
    ApprovalError,
    ApprovalRequest,
)
from dsh_system_prompt import SystemPrompt
from dsh_tools import Tool, ToolCall, Tools
from tests.plugins.stdio_agent.stdio_support import shell_deployment
from tests.support import failed_deployment

pytestmark = pytest.mark.anyio

ASK = ApprovalRequest(kind="bash", title="bash: rm -rf build", detail="rm -rf build")


def heard(root: Context) -> list[tuple[str, bool, str]]:
    """Every ``approval/decided`` as (title, approved, by)."""
    seen: list[tuple[str, bool, str]] = []

    def decided(request: ApprovalRequest, approved: bool, by: str) -> None:
        seen.append((request.title, approved, by))

    root.on("approval/decided", decided)
    return seen


@pytest.mark.parametrize(("policy", "answer"), [("allow", True), ("deny", False)])
async def test_allow_and_deny_answer_without_asking(policy: str, answer: bool) -> None:
    asked: list[ApprovalRequest] = []
    async with Context() as root:
        await root.plugin(Approval, {"policy": policy})
        seen = heard(root)
        root.approval.set_responder(asked.append)
        assert root.approval.policy == policy
        assert await root.approval.request(ASK) is answer
        assert asked == []
        assert seen == [(ASK.title, answer, "policy")]


@pytest.mark.parametrize(
    ("answer", "by"), [(True, "responder"), (False, "responder"), (None, "policy")]
)
async def test_always_ask_reaches_the_responder_even_under_allow(
    answer: bool | None, by: str
) -> None:
    forced = ApprovalRequest(kind="bash", title="unsandboxed bash: make", always_ask=True)
    asked: list[ApprovalRequest] = []

    def responder(request: ApprovalRequest) -> bool:
        asked.append(request)
        return bool(answer)

    async with Context() as root:
        await root.plugin(Approval, {"policy": "allow"})
        seen = heard(root)
        if answer is not None:
            root.approval.set_responder(responder)
        assert await root.approval.request(forced) is bool(answer)
        assert await root.approval.request(ASK) is True
        assert asked == ([forced] if answer is not None else [])
        assert seen == [(forced.title, bool(answer), by), (ASK.title, True, "policy")]


async def test_always_ask_is_still_declined_under_deny() -> None:
    forced = ApprovalRequest(kind="bash", title="unsandboxed bash: make", always_ask=True)
    async with Context() as root:
        await root.plugin(Approval, {"policy": "deny"})
        root.approval.set_responder(lambda request: True)
        assert await root.approval.request(forced) is False


async def test_the_default_policy_is_allow() -> None:
    async with Context() as root:
        await root.plugin(Approval)
        assert root.approval.policy == "allow"
        await root.approval.require(ASK)


async def test_ask_without_a_responder_is_no() -> None:
    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        seen = heard(root)
        assert await root.approval.request(ASK) is False
        assert seen == [(ASK.title, False, "policy")]


@pytest.mark.parametrize("answer", [True, False])
async def test_ask_calls_a_sync_responder(answer: bool) -> None:
    asked: list[ApprovalRequest] = []

    def responder(request: ApprovalRequest) -> bool:
        asked.append(request)
        return answer

    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        seen = heard(root)
        root.approval.set_responder(responder)
        assert await root.approval.request(ASK) is answer
        assert asked == [ASK]
        assert seen == [(ASK.title, answer, "responder")]


async def test_ask_awaits_an_async_responder() -> None:
    async def responder(request: ApprovalRequest) -> bool:
        await anyio.lowlevel.checkpoint()
        return request.kind == "bash"

    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        root.approval.set_responder(responder)
        assert await root.approval.request(ASK) is True
        assert await root.approval.request(ApprovalRequest("write", "write a.txt")) is False


async def test_a_responder_answer_that_is_not_a_bool_is_an_error() -> None:
    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        root.approval.set_responder(lambda request: "yes")
        with pytest.raises(ApprovalError, match=r"answered 'yes' for 'bash: rm -rf build'"):
            await root.approval.request(ASK)


async def test_a_responder_error_propagates() -> None:
    def responder(request: ApprovalRequest) -> bool:
        raise OSError("the terminal went away")

    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        root.approval.set_responder(responder)
        with pytest.raises(OSError, match="the terminal went away"):
            await root.approval.request(ASK)


async def test_cancelling_the_caller_cancels_the_question() -> None:
    asked = anyio.Event()

    async def responder(request: ApprovalRequest) -> bool:
        asked.set()
        await anyio.sleep_forever()
        return True

    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        root.approval.set_responder(responder)
        async with anyio.create_task_group() as tg:
            tg.start_soon(root.approval.request, ASK)
            await asked.wait()
            tg.cancel_scope.cancel()


async def test_one_responder_at_a_time_and_its_exact_disposer() -> None:
    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        stop = root.approval.set_responder(lambda request: True)
        with pytest.raises(ApprovalError, match="already set"):
            root.approval.set_responder(lambda request: True)
        assert await root.approval.request(ASK) is True
        await stop()
        assert await root.approval.request(ASK) is False
        root.approval.set_responder(lambda request: True)
        assert await root.approval.request(ASK) is True


async def test_a_responder_must_be_callable() -> None:
    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        with pytest.raises(ApprovalError, match="must be callable, got 42"):
            root.approval.set_responder(42)


async def test_the_responder_goes_with_the_plugin_that_set_it() -> None:
    class Front(Plugin):
        inject = ("approval",)

        def setup(self) -> Disposer:
            stop: Disposer = self.ctx.approval.set_responder(lambda request: True)
            return stop

    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        approval = root.approval
        fiber = await root.plugin(Front)
        assert await approval.request(ASK) is True
        await fiber.dispose()
        assert approval._responders == []
        assert await approval.request(ASK) is False


@pytest.mark.parametrize(
    ("policy", "message", "by"),
    [
        ("deny", "refused by the approval policy (deny): bash: rm -rf build", "deny"),
        # A person's no keeps its wording.
        ("ask", "the user declined: bash: rm -rf build", None),
    ],
)
async def test_require_raises_the_denial_naming_who_refused(
    policy: str, message: str, by: str | None
) -> None:
    async with Context() as root:
        await root.plugin(Approval, {"policy": policy})
        root.approval.set_responder(lambda request: False)
        with pytest.raises(ApprovalDeniedError) as info:
            await root.approval.require(ASK)
    error = info.value
    assert (str(error), error.policy) == (message, by)
    assert error.code == "APPROVAL_DENIED"
    assert error.request is ASK
    assert isinstance(error, PermissionError)


class NoArgs(BaseModel):
    pass


async def test_a_tool_that_is_declined_gets_an_error_result() -> None:
    async def guarded(args: NoArgs, call: ToolCall) -> str:
        await approval.require(ApprovalRequest("edit", "edit notes.txt", call=call))
        return "edited"

    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Approval, {"policy": "deny"})
        approval = root.approval
        root.tools.register(
            Tool(name="edit", description="Edit.", parameters=NoArgs, execute=guarded)
        )
        result = await root.tools.execute("edit", "{}", ToolCall("c1"))
    assert (result.content, result.is_error, result.code) == (
        "Error: refused by the approval policy (deny): edit notes.txt",
        True,
        "APPROVAL_DENIED",
    )


async def test_an_unknown_policy_is_a_config_error() -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match=r"plugin \"approval\"(.|\n)*\(at policy\)"):
            await root.plugin(Approval, {"policy": "sometimes"})
        with pytest.raises(ConfigError, match=r"Extra inputs are not permitted \(at polcy\)"):
            await root.plugin(Approval, {"polcy": "ask"})
        assert root.get("approval") is None


async def test_a_bad_config_in_yaml_names_the_file_line_and_entry(tmp_path: Path) -> None:
    path, error = await failed_deployment(
        tmp_path,
        """\
        - id: ok
          name: tools
        - id: gate
          name: approval
          config: {policy: maybe}
        """,
    )
    message = str(error)
    assert f"{path}:3" in message
    assert '"gate"' in message or "gate" in message
    assert "policy" in message


async def test_mounting_and_disposing_restores_the_services() -> None:
    async with Context() as root:
        fiber = await root.plugin(Approval, {"policy": "ask"})
        assert root.get("approval") is not None
        await fiber.dispose()
        assert root.get("approval") is None


def test_dsh_run_with_policy_deny_says_the_policy_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = shell_deployment(tmp_path)
    path.write_text(path.read_text().replace("policy: ask", "policy: deny"))
    assert cli.main(["run", str(path), "-p", "go"]) == 0
    assert capsys.readouterr().out == (
        "result: Error: refused by the approval policy (deny): bash: printf ALLOWED\n"
    )


@pytest.mark.parametrize(
    ("permission", "always_ask", "policy", "answer", "by"),
    [
        # allow: every question of the call approved, whatever the policy ...
        ("allow", False, "ask", True, "hook"),
        ("allow", False, "deny", True, "hook"),
        # ... but an always_ask one is asked as usual (no responder here: no).
        ("allow", True, "ask", False, "policy"),
        ("allow", True, "deny", False, "policy"),
        # approved: a person approved the call; every question of it is answered.
        ("approved", True, "ask", True, "hook"),
        ("approved", True, "deny", True, "hook"),
        # None: the policy decides.
        (None, False, "ask", False, "policy"),
    ],
)
async def test_a_calls_permission_settles_its_questions(
    permission: str | None, always_ask: bool, policy: str, answer: bool, by: str
) -> None:
    """RFC 0036: a ``tool/before`` listener's decision, carried by the call."""
    call = ToolCall("c1", name="bash", permission=permission)
    request = ApprovalRequest(kind="bash", title="bash: make", call=call, always_ask=always_ask)
    async with Context() as root:
        await root.plugin(Approval, {"policy": policy})
        seen = heard(root)
        assert await root.approval.request(request) is answer
        assert seen == [("bash: make", answer, by)]


async def test_an_always_answer_approves_and_is_announced() -> None:
    """RFC 0036: ``"always"`` approves, emits ``approval/always`` first, and
    ``remembers`` says whether anyone listens to it."""
    order: list[str] = []
    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        approval = root.approval
        assert not approval.remembers
        stop = root.on("approval/always", lambda request: order.append(f"always {request.title}"))
        assert approval.remembers
        root.on("approval/decided", lambda request, approved, by: order.append(f"{approved} {by}"))
        approval.set_responder(lambda request: ALWAYS)
        assert await approval.request(ASK) is True
        assert order == [f"always {ASK.title}", "True responder"]
        stop()
        assert not approval.remembers


async def test_another_string_is_not_an_answer() -> None:
    async with Context() as root:
        await root.plugin(Approval, {"policy": "ask"})
        root.approval.set_responder(lambda request: "yes")
        with pytest.raises(
            ApprovalError, match=r"answered 'yes' .* must answer True, False or \"always\""
        ):
            await root.approval.request(ASK)
