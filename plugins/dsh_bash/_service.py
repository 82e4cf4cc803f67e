"""The ``Bash`` seam: one executor at a time, and the checks every request passes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, Service

from ._errors import BashArgumentError, BashError, BashUnavailableError
from ._types import BashExecutor, BashRequest, BashResult

__all__ = ["Bash", "BashConfig", "BeforeRun"]

#: Awaited with each request after its checks passed, before the executor runs it.
BeforeRun = Callable[[BashRequest], Awaitable[None]]


class BashConfig(BaseModel):
    """Config of the ``bash`` seam: it has no settings (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


class Bash(Service):
    """Runs shell commands through the executor that is set (ctx key ``bash``).

    The seam owns the contract (:class:`BashRequest` in, :class:`BashResult` out) and
    the checks; an executor plugin (``bash-local``) does the running. Tools and jobs
    inject this service and never start an executor themselves.
    """

    key = "bash"
    name = "bash"
    Config = BashConfig

    def __init__(self, ctx: Context, config: BashConfig) -> None:
        super().__init__(ctx, config)
        self._executors: list[BashExecutor] = []
        self._before: list[BeforeRun] = []

    @property
    def executor(self) -> BashExecutor | None:
        """The executor that is set, or None."""
        return self._executors[0] if self._executors else None

    def set_executor(self, executor: BashExecutor) -> Disposer:
        """Run every request with ``executor`` while the caller lives; returns the exact
        disposer. One at a time: a second raises :class:`BashError`, as does an object
        without ``run`` and ``max_timeout_ms``."""
        checked: object = executor
        if not callable(getattr(checked, "run", None)) or not isinstance(
            getattr(checked, "max_timeout_ms", None), int
        ):
            raise BashError(
                f"a bash executor needs an async run(request) and an int max_timeout_ms, "
                f"got {executor!r}"
            )
        if self._executors:
            raise BashError(
                f"a bash executor is already set ({self._executors[0]!r}); one at a time"
            )

        def body() -> Iterator[Callable[[], None]]:
            self._executors.append(executor)
            yield self._executors.clear

        return self.ctx.effect(body, label="bash executor")

    def add_before_run(self, hook: BeforeRun) -> Disposer:
        """Await ``hook(request)`` before each command runs, after its checks passed, while
        the caller lives (in the order added); returns the exact disposer. An error it
        raises is the run's: the command does not start."""
        hooks = self._before

        def body() -> Iterator[Callable[[], None]]:
            hooks.append(hook)
            yield lambda: hooks.remove(hook)

        return self.ctx.effect(body, label="bash before-run hook")

    def check(self, request: BashRequest) -> BashExecutor:
        """The executor that would run ``request``; raises what :meth:`run` would raise
        before starting anything: :class:`BashArgumentError` for a blank command or a
        bad ``timeout_ms``, :class:`BashUnavailableError` when no executor is set."""
        checked: object = request
        if not isinstance(checked, BashRequest):
            raise BashError(f"bash.run() expects a BashRequest, got {type(checked).__name__}")
        command: object = request.command
        if not isinstance(command, str) or not command.strip():
            raise BashArgumentError("invalid command: expected a non-empty string")
        executor = self.executor
        if executor is None:
            raise BashUnavailableError(
                "no bash executor is set: load one (bash-local) next to the bash plugin"
            )
        timeout: object = request.timeout_ms
        if timeout is not None:
            if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0:
                raise BashArgumentError(
                    f"invalid timeout_ms: expected a positive number of milliseconds "
                    f"(or 0 for none), got {timeout!r}"
                )
            if timeout > executor.max_timeout_ms:
                raise BashArgumentError(f"invalid timeout_ms: at most {executor.max_timeout_ms}")
        return executor

    async def run(self, request: BashRequest) -> BashResult:
        """Run ``request`` with the executor (after :meth:`check`). Cancelling the caller
        kills the command's process group and propagates; spawn failures raise
        :class:`~dsh_bash.BashSpawnError`. A non-zero exit is a normal result."""
        executor = self.check(request)
        for hook in list(self._before):
            await hook(request)
        return await executor.run(request)
