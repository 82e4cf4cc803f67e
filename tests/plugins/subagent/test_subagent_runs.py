"""Starting runs: refusals before anything starts, ``subagent/start`` and
``subagent/end`` once per run in the parent's scope, results that settle once and
never raise, stop reasons and delegation depth."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from dsh.testing import capture_logs, errors_logged
from dsh_session import Session, SessionHeader
from dsh_subagent import (
    NoProviderError,
    StopReason,
    SubagentArgumentError,
    SubagentDepthError,
    SubagentOutcome,
    SubagentRequest,
    SubagentResult,
    SubagentRun,
    UnsupportedCapabilityError,
    delegation_depth,
    stop_reason_of,
)
from tests.plugins.subagent_support import Rig, StubProvider, subagent_runtime

pytestmark = pytest.mark.anyio

TWO_AGENTS = {"agents": [{"id": "main"}, {"id": "other"}]}
DONE = SubagentResult("all done", "completed")


def at_depth(depth: object) -> Any:
    """A parent handle whose session records ``depth`` (``...``: records none)."""
    meta = {} if depth is ... else {"delegation_depth": depth}
    return SimpleNamespace(session=Session(SessionHeader("s", 0.0, None, meta)))


def settled(outcome: SubagentOutcome) -> bool:
    """``outcome.done`` read afresh (a type checker would keep an earlier narrowing)."""
    return outcome.done


def run_events(rig: Rig, scope: Any = None) -> list[tuple[Any, ...]]:
    """``subagent/start`` and ``/end`` as heard through ``scope``'s context (an agent's
    ``ctx``; None: the root, globally)."""
    ctx = rig.root if scope is None else scope.ctx
    log: list[tuple[Any, ...]] = []
    ctx.on("subagent/start", lambda run: log.append(("start", run)))
    ctx.on("subagent/end", lambda run, result: log.append(("end", run, result)))
    return log


# -- refusals before anything starts ---------------------------------------------------------


async def test_an_unknown_provider_is_no_provider_listing_the_registered() -> None:
    async with subagent_runtime() as rig:
        log = run_events(rig)
        with pytest.raises(NoProviderError) as caught:
            await rig.start("nope")
        assert str(caught.value) == 'no subagent provider "nope"; registered: "spawn", "fork"'
        assert caught.value.code == "NO_PROVIDER"
        assert isinstance(caught.value, LookupError)
        assert log == []
        assert [a.id for a in rig.root.agents.list()] == ["main"]


async def test_no_provider_says_when_none_is_registered() -> None:
    async with subagent_runtime(providers=()) as rig:
        with pytest.raises(
            NoProviderError, match=r'^no subagent provider "spawn"; registered: \(none\)$'
        ):
            await rig.start("spawn")


@pytest.mark.parametrize(
    ("field", "value", "capability"),
    [
        ("persona", "Be brief.", "persona"),
        ("tool_filter", {"deny": ["x"]}, "tool_filter"),
        ("max_depth", 3, "depth_limit"),
    ],
)
async def test_a_request_beyond_the_provider_is_unsupported_capability(
    field: str, value: object, capability: str
) -> None:
    async with subagent_runtime(providers=()) as rig:
        stub = StubProvider(capabilities=frozenset())
        rig.subagents.register_provider(stub)
        log = run_events(rig)
        asked: dict[str, Any] = {field: value}
        with pytest.raises(UnsupportedCapabilityError) as caught:
            await rig.start("stub", **asked)
        assert str(caught.value) == (
            f'subagent provider "stub" does not support the "{capability}" capability'
        )
        assert caught.value.code == "UNSUPPORTED_CAPABILITY"
        assert stub.requests == []
        assert log == []
        # The capability alone is enough.
        rig.subagents.register_provider(StubProvider("able", capabilities=frozenset({capability})))
        await rig.start("able", **asked)


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        ({"prompt": ""}, "invalid prompt: expected a non-empty string"),
        ({"prompt": " \n\t"}, "invalid prompt: expected a non-empty string"),
        ({"prompt": None}, "invalid prompt: expected a non-empty string"),
        (
            {"tool_filter": ["read"]},
            "invalid tool_filter ['read']: expected a mapping with the keys \"allow\" "
            'and/or "deny"',
        ),
        (
            {"tool_filter": {"alow": ["read"]}},
            "invalid tool_filter {'alow': ['read']}: expected a mapping with the keys "
            '"allow" and/or "deny"',
        ),
        ({"max_depth": -1}, "invalid max_depth -1: expected a non-negative integer"),
        ({"max_depth": "2"}, "invalid max_depth '2': expected a non-negative integer"),
        ({"max_depth": True}, "invalid max_depth True: expected a non-negative integer"),
    ],
    ids=[
        "empty-prompt",
        "blank-prompt",
        "prompt-not-str",
        "tool-filter-not-mapping",
        "tool-filter-unknown-key",
        "negative-depth",
        "depth-not-int",
        "depth-bool",
    ],
)
async def test_a_malformed_request_is_invalid_args_and_starts_nothing(
    request_fields: dict[str, Any], message: str
) -> None:
    async with subagent_runtime(providers=()) as rig:
        stub = StubProvider()
        rig.subagents.register_provider(stub)
        log = run_events(rig)
        fields: dict[str, Any] = {"prompt": "go", **request_fields}
        request = SubagentRequest(parent=rig.parent, **fields)
        with pytest.raises(SubagentArgumentError) as caught:
            await rig.subagents.start("stub", request)
        assert str(caught.value) == message
        assert caught.value.code == "INVALID_ARGS"
        assert stub.requests == []
        assert log == []


async def test_a_request_must_be_a_subagent_request() -> None:
    async with subagent_runtime(providers=()) as rig:
        stub = StubProvider()
        rig.subagents.register_provider(stub)
        bad: Any = {"prompt": "go"}
        with pytest.raises(SubagentArgumentError, match=r"^expected a SubagentRequest, got dict$"):
            await rig.subagents.start("stub", bad)
        assert stub.requests == []


@pytest.mark.parametrize("awaitable", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("returned", "shown"),
    [
        ("a run", "'a run'"),
        (
            SubagentRun("r", None, "not an outcome"),  # type: ignore[arg-type]
            "SubagentRun(id='r', agent=None, result='not an outcome', provider='')",
        ),
    ],
    ids=["not-a-run", "result-not-an-outcome"],
)
async def test_a_provider_returning_a_non_run_is_refused(
    awaitable: bool, returned: object, shown: str
) -> None:
    async with subagent_runtime(providers=()) as rig:
        rig.subagents.register_provider(StubProvider(awaitable=awaitable, returns=returned))
        log = run_events(rig)
        with pytest.raises(SubagentArgumentError) as caught:
            await rig.start("stub")
        assert str(caught.value) == (
            f'subagent provider "stub" returned {shown}, not a SubagentRun whose result '
            "is a SubagentOutcome"
        )
        assert log == []


# -- subagent/start and subagent/end ---------------------------------------------------------


@pytest.mark.parametrize("awaitable", [False, True], ids=["sync", "async"])
async def test_start_and_end_once_per_run_in_the_parents_scope(awaitable: bool) -> None:
    async with subagent_runtime(providers=(), core=TWO_AGENTS) as rig:
        stub = StubProvider(awaitable=awaitable)
        rig.subagents.register_provider(stub)
        other = rig.root.agents.get("other")
        everyone, parents, others = (
            run_events(rig),
            run_events(rig, rig.parent),
            run_events(rig, other),
        )
        run = await rig.start("stub")
        assert run is stub.runs[0]
        assert run.provider == "stub"
        assert parents == [("start", run)]
        run.result.set(DONE)
        run.result.set(SubagentResult("too late", "error"))  # the first result stands
        assert parents == [("start", run), ("end", run, DONE)]
        assert everyone == parents  # a global listener hears every run
        assert others == []  # scoped to another agent: not this parent's runs
        assert await run.result is DONE


async def test_a_run_settled_before_start_returns_still_ends_once() -> None:
    async with subagent_runtime(providers=()) as rig:
        stub = StubProvider()
        settled = SubagentRun("early", None, SubagentOutcome())
        settled.result.set(DONE)
        stub.returns = settled
        rig.subagents.register_provider(stub)
        log = run_events(rig, rig.parent)
        run = await rig.start("stub")
        assert log == [("start", run), ("end", run, DONE)]


async def test_run_listener_failures_are_logged_and_the_run_goes_on() -> None:
    async with subagent_runtime(providers=()) as rig:
        stub = StubProvider()
        rig.subagents.register_provider(stub)
        failures: list[BaseException] = []

        def broken(*args: Any) -> None:
            failures.append(RuntimeError("observer broke"))
            raise failures[-1]

        rig.root.on("subagent/start", broken)
        rig.root.on("subagent/end", broken)
        log = run_events(rig)
        with capture_logs("dsh.subagent") as logs:
            run = await rig.start("stub")
            run.result.set(DONE)
        assert await run.result is DONE
        assert log == [("start", run), ("end", run, DONE)]  # later listeners still heard
        records = errors_logged(logs)
        assert [r.getMessage() for r in records] == [
            "a listener of subagent/start failed",
            "a listener of subagent/end failed",
        ]
        assert [r.exc_info[1] for r in records if r.exc_info] == failures


# -- results ---------------------------------------------------------------------------------


async def test_a_result_may_be_awaited_any_number_of_times() -> None:
    outcome = SubagentOutcome()
    got: list[SubagentResult] = []

    async def wait() -> None:
        got.append(await outcome)

    assert not settled(outcome)
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(wait)
        await anyio.lowlevel.checkpoint()
        outcome.set(DONE)
    assert settled(outcome)
    assert got == [DONE] * 3
    assert all(r is DONE for r in got)
    assert await outcome is DONE
    assert await outcome is DONE
    late: list[SubagentResult] = []
    outcome.add_callback(late.append)  # called at once: the run has settled
    assert late == [DONE]


async def test_callbacks_run_once_when_the_result_is_set() -> None:
    outcome = SubagentOutcome()
    seen: list[SubagentResult] = []
    outcome.add_callback(seen.append)
    outcome.set(DONE)
    outcome.set(SubagentResult("again", "error"))
    assert seen == [DONE]


@pytest.mark.parametrize(
    ("reason", "stop"),
    [
        (None, "aborted"),
        ({"kind": "completed"}, "completed"),
        ({"kind": "max-tokens"}, "max-tokens"),
        ({"kind": "aborted", "reason": "user"}, "aborted"),
        ({"kind": "interrupted"}, "aborted"),
        ({"kind": "blocked", "message": "no"}, "refusal"),
        ({"kind": "error", "message": "boom", "code": "X"}, "error"),
        ({"kind": "something-new"}, "error"),
        ({}, "error"),
    ],
)
def test_stop_reason_of_maps_turn_ends(reason: Mapping[str, Any] | None, stop: StopReason) -> None:
    assert stop_reason_of(reason) == stop


# -- depth -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("depth", "expected"), [(..., 0), (0, 0), (2, 2), ("2", 0)])
def test_delegation_depth_reads_the_session_header(depth: object, expected: int) -> None:
    assert delegation_depth(at_depth(depth)) == expected


async def test_a_child_deeper_than_max_depth_is_refused() -> None:
    async with subagent_runtime(providers=()) as rig:
        stub = StubProvider()
        rig.subagents.register_provider(stub)
        deep = SubagentRequest("go", at_depth(1), max_depth=1)
        with pytest.raises(SubagentDepthError) as caught:
            await rig.subagents.start("stub", deep)
        assert str(caught.value) == "subagent depth 2 exceeds maxDepth 1"
        assert caught.value.code == "SUBAGENT_DEPTH"
        assert stub.requests == []
        # Depth 1 under max_depth 1 is allowed; so is anything without a limit.
        await rig.subagents.start("stub", SubagentRequest("go", at_depth(0), max_depth=1))
        await rig.subagents.start("stub", SubagentRequest("go", at_depth(7)))
        assert len(stub.requests) == 2
