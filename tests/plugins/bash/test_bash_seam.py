"""The bash seam: one executor at a time, the checks every request passes, helpers."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from dsh import ConfigError, Context, Disposer, Plugin
from dsh_bash import (
    Bash,
    BashArgumentError,
    BashError,
    BashRequest,
    BashResult,
    BashUnavailableError,
    StreamOutput,
    join_parts,
    signal_name,
)

pytestmark = pytest.mark.anyio

EMPTY = StreamOutput("")


class FakeExecutor:
    """An executor that answers every request with exit code 7 and keeps them."""

    max_timeout_ms = 1000

    def __init__(self) -> None:
        self.requests: list[BashRequest] = []

    async def run(self, request: BashRequest) -> BashResult:
        self.requests.append(request)
        return BashResult(7, None, False, False, StreamOutput("out"), EMPTY)


async def test_requests_go_to_the_executor_that_is_set() -> None:
    executor = FakeExecutor()
    async with Context() as root:
        await root.plugin(Bash)
        assert root.get("bash").executor is None
        stop = root.bash.set_executor(executor)
        assert root.bash.executor is executor
        request = BashRequest("ls", cwd="/tmp", timeout_ms=1000, env={"A": "1"})
        result = await root.bash.run(request)
        assert (result.exit_code, result.stdout.text) == (7, "out")
        assert executor.requests == [request]
        await stop()
        assert root.get("bash").executor is None
        with pytest.raises(BashUnavailableError, match="no bash executor is set: load one"):
            await root.bash.run(request)


async def test_one_executor_at_a_time() -> None:
    async with Context() as root:
        await root.plugin(Bash)
        root.bash.set_executor(FakeExecutor())
        with pytest.raises(BashError, match="a bash executor is already set"):
            root.bash.set_executor(FakeExecutor())


@pytest.mark.parametrize("executor", [object(), type("NoMax", (), {"run": lambda self: 0})()])
async def test_an_object_that_is_not_an_executor_is_refused(executor: Any) -> None:
    async with Context() as root:
        await root.plugin(Bash)
        with pytest.raises(BashError, match=r"needs an async run\(request\) and an int"):
            root.bash.set_executor(executor)
        assert root.bash.executor is None


async def test_the_executor_goes_with_the_plugin_that_set_it() -> None:
    class Executor(Plugin):
        inject = ("bash",)

        def setup(self) -> Disposer:
            stop: Disposer = self.ctx.bash.set_executor(FakeExecutor())
            return stop

    async with Context() as root:
        await root.plugin(Bash)
        fiber = await root.plugin(Executor)
        assert root.bash.executor is not None
        await fiber.dispose()
        assert root.bash._executors == []


@pytest.mark.parametrize(
    ("request_", "error", "message"),
    [
        (BashRequest(""), BashArgumentError, "invalid command: expected a non-empty string"),
        (BashRequest(" \n\t"), BashArgumentError, "invalid command: expected a non-empty"),
        (BashRequest(3), BashArgumentError, "invalid command"),  # type: ignore[arg-type]
        (BashRequest("ls", timeout_ms=-1), BashArgumentError, "got -1"),
        (BashRequest("ls", timeout_ms=True), BashArgumentError, "got True"),
        (BashRequest("ls", timeout_ms=1.5), BashArgumentError, "got 1.5"),  # type: ignore[arg-type]
        (BashRequest("ls", timeout_ms=1001), BashArgumentError, "invalid timeout_ms: at most 1000"),
        ("ls", BashError, "bash.run\\(\\) expects a BashRequest, got str"),
    ],
)
async def test_bad_requests_are_refused_before_anything_runs(
    request_: Any, error: type[Exception], message: str
) -> None:
    executor = FakeExecutor()
    async with Context() as root:
        await root.plugin(Bash)
        root.bash.set_executor(executor)
        with pytest.raises(error, match=message) as info:
            await root.bash.run(request_)
    assert executor.requests == []
    if error is BashArgumentError:
        assert info.value.code == "INVALID_ARGS"  # type: ignore[attr-defined]


async def test_check_returns_the_executor_and_accepts_the_edges() -> None:
    executor = FakeExecutor()
    async with Context() as root:
        await root.plugin(Bash)
        with pytest.raises(BashArgumentError):
            root.bash.check(BashRequest(""))  # the command is checked first
        with pytest.raises(BashUnavailableError):
            root.bash.check(BashRequest("ls"))
        root.bash.set_executor(executor)
        for timeout in (None, 0, 1000):
            assert root.bash.check(BashRequest("ls", timeout_ms=timeout)) is executor


async def test_the_seam_has_no_config() -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match=r"Extra inputs are not permitted \(at shell\)"):
            await root.plugin(Bash, {"shell": "zsh"})
        assert root.get("bash") is None


def test_signal_names() -> None:
    assert signal_name(signal.SIGTERM) == "SIGTERM"
    assert signal_name(9) == "SIGKILL"
    assert signal_name(signal.SIGRTMIN + 2) == f"SIG{signal.SIGRTMIN + 2}"


@pytest.mark.parametrize(
    ("parts", "joined"),
    [
        ([], ""),
        (["a"], "a"),
        (["a", "b"], "a\nb"),
        (["a\n", "b"], "a\nb"),
        (["a\n\n", "b", "c\n"], "a\n\nb\nc\n"),
    ],
)
def test_join_parts(parts: list[str], joined: str) -> None:
    assert join_parts(parts) == joined
