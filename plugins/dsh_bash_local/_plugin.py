"""The ``bash-local`` plugin: sets the local executor on the ``bash`` seam."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from dsh import Context, Plugin

from ._config import LocalBashConfig
from ._executor import LocalExecutor

__all__ = ["LocalBash"]


class LocalBash(Plugin):
    """Runs the ``bash`` seam's commands on this machine (see :class:`LocalExecutor`).

    On unload it stops taking requests, kills the commands still running (their
    callers get ``BashUnavailableError``) and deletes its spill folder.
    """

    name = "bash-local"
    Config = LocalBashConfig
    inject = ("bash",)

    def __init__(self, ctx: Context, config: LocalBashConfig) -> None:
        super().__init__(ctx, config)
        self.executor = LocalExecutor(config)

    def setup(self) -> Iterator[Callable[[], Any]]:
        executor = self.executor
        yield executor.spill.remove
        yield executor.stop_all
        yield self.ctx.bash.set_executor(executor)
