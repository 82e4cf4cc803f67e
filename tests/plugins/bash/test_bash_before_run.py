"""The bash seam's before-run hooks: awaited in order after the checks, an error stops
the command, the exact disposer removes one."""

from __future__ import annotations

import pytest

from dsh import Context
from dsh_bash import Bash, BashArgumentError, BashRequest, BashResult, StreamOutput

pytestmark = pytest.mark.anyio


class Executor:
    max_timeout_ms = 1000

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    async def run(self, request: BashRequest) -> BashResult:
        self.seen.append(f"run {request.command}")
        return BashResult(0, None, False, False, StreamOutput(""), StreamOutput(""))


async def test_hooks_run_in_order_before_the_command_and_go_with_their_disposer() -> None:
    seen: list[str] = []
    async with Context() as root:
        await root.plugin(Bash)
        root.bash.set_executor(Executor(seen))

        async def first(request: BashRequest) -> None:
            seen.append(f"first {request.command}")

        async def second(request: BashRequest) -> None:
            seen.append(f"second {request.command}")

        stop_first = root.bash.add_before_run(first)
        root.bash.add_before_run(second)
        await root.bash.run(BashRequest("ls"))
        stop_first()
        await root.bash.run(BashRequest("pwd"))
        with pytest.raises(BashArgumentError):  # the checks come first: no hook runs
            await root.bash.run(BashRequest(" "))
    assert seen == ["first ls", "second ls", "run ls", "second pwd", "run pwd"]


async def test_a_failing_hook_stops_the_command() -> None:
    seen: list[str] = []
    async with Context() as root:
        await root.plugin(Bash)
        root.bash.set_executor(Executor(seen))

        async def refuse(request: BashRequest) -> None:
            raise RuntimeError("no snapshot")

        root.bash.add_before_run(refuse)
        with pytest.raises(RuntimeError, match="no snapshot"):
            await root.bash.run(BashRequest("ls"))
    assert seen == []
