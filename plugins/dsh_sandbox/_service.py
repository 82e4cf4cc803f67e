"""The ``Sandbox`` seam: one mechanism at a time, asked how to start a confined command."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, Service

from ._errors import SandboxError, SandboxUnavailableError
from ._types import Launch, SandboxMechanism, SandboxPolicy

if TYPE_CHECKING:
    from dsh import CheckReport

__all__ = ["Sandbox", "SandboxConfig"]

_NONE_SET = "no sandbox mechanism is set: load one (sandbox-linux) next to the sandbox plugin"


class SandboxConfig(BaseModel):
    """Config of the ``sandbox`` seam: it has no settings (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


class Sandbox(Service):
    """Tells executors how to start a command confined by a :class:`SandboxPolicy`
    (ctx key ``sandbox``), through the mechanism that is set (``sandbox-linux``)."""

    key = "sandbox"
    name = "sandbox"
    Config = SandboxConfig

    def __init__(self, ctx: Context, config: SandboxConfig) -> None:
        super().__init__(ctx, config)
        self._mechanisms: list[SandboxMechanism] = []

    def setup(self) -> Disposer:
        return self.home_ctx.on("deployment/check", self._check)

    async def _check(self, report: CheckReport) -> None:
        """``dsh check``: which mechanism confines commands, or why none can."""
        try:
            used = await self.probe()
        except SandboxUnavailableError as exc:
            report.fail(f"{report.path}: sandbox: {exc} ({exc.code})")
        else:
            report.ok(f"sandbox: {used}")

    @property
    def mechanism(self) -> str | None:
        """The name of the mechanism that is set, or None."""
        return self._mechanisms[0].name if self._mechanisms else None

    def set_mechanism(self, mechanism: SandboxMechanism) -> Disposer:
        """Confine every command with ``mechanism`` while the caller lives; returns the
        exact disposer. One at a time: a second raises :class:`SandboxError`, as does an
        object without a str ``name`` and callable ``probe`` and ``wrap``."""
        checked: object = mechanism
        if not isinstance(checked, SandboxMechanism) or not isinstance(
            getattr(checked, "name", None), str
        ):
            raise SandboxError(
                f"a sandbox mechanism needs a str name, an async probe() and an async "
                f"wrap(policy), got {mechanism!r}"
            )
        if self._mechanisms:
            raise SandboxError(
                f"a sandbox mechanism is already set ({self._mechanisms[0].name}); one at a time"
            )

        def body() -> Iterator[Callable[[], None]]:
            self._mechanisms.append(mechanism)
            yield self._mechanisms.clear

        return self.ctx.effect(body, label="sandbox mechanism")

    def _current(self) -> SandboxMechanism:
        if not self._mechanisms:
            raise SandboxUnavailableError(_NONE_SET)
        return self._mechanisms[0]

    async def probe(self) -> str:
        """What confines commands here (e.g. ``bubblewrap``), for ``dsh check``; raises
        :class:`SandboxUnavailableError` when nothing would (or no mechanism is set)."""
        return await self._current().probe()

    async def wrap(self, policy: SandboxPolicy) -> Launch:
        """How to start a command confined by ``policy``. Raises
        :class:`SandboxUnavailableError` naming what was tried when it cannot be
        confined (or no mechanism is set), :class:`SandboxError` for a ``policy`` that
        is not a :class:`SandboxPolicy`."""
        checked: object = policy
        if not isinstance(checked, SandboxPolicy):
            raise SandboxError(
                f"sandbox.wrap() expects a SandboxPolicy, got {type(checked).__name__}"
            )
        mechanism = self._current()
        launch: object = await mechanism.wrap(policy)
        if not isinstance(launch, Launch):
            raise SandboxError(
                f"sandbox mechanism {mechanism.name} answered wrap() with "
                f"{type(launch).__name__}, not a Launch"
            )
        return launch
