"""The ``bash-local`` plugin: sets the local executor on the ``bash`` seam."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from dsh import ConfigError, Context, Plugin

from ._config import LocalBashConfig
from ._executor import LocalExecutor

__all__ = ["LocalBash"]


class LocalBash(Plugin):
    """Runs the ``bash`` seam's commands on this machine (see :class:`LocalExecutor`).

    With ``sandbox`` on it runs each command in the ``sandbox`` service's sandbox (a
    located ``ConfigError`` when that service is not loaded) and provides what the
    sandbox allows at ctx key ``bash_sandbox`` (a :class:`~dsh_bash.BashSandbox`).

    On unload it stops taking requests, kills the commands still running (their
    callers get ``BashUnavailableError``) and deletes its spill folder.
    """

    name = "bash-local"
    Config = LocalBashConfig
    inject = ("bash",)
    optional = ("sandbox",)

    def __init__(self, ctx: Context, config: LocalBashConfig) -> None:
        super().__init__(ctx, config)
        sandbox = None if config.sandbox == "off" else ctx.get("sandbox")
        self.executor = LocalExecutor(config, sandbox)

    def setup(self) -> Iterator[Callable[[], Any]]:
        self._check_spill_dir()
        self._check_sandbox()
        executor = self.executor
        yield executor.spill.remove
        yield executor.stop_all
        yield self.ctx.bash.set_executor(executor)
        if executor.confinement is not None:
            yield self.ctx.provide("bash_sandbox", executor.confinement.describe())

    def _where(self, key: str) -> str:
        entry = self.ctx.fiber.entry
        return "" if entry is None else f"{entry.locate((key,))}: "

    def _check_sandbox(self) -> None:
        """``sandbox`` on needs the ``sandbox`` service (it restarts this plugin when it
        comes or goes)."""
        config: LocalBashConfig = self.config
        if config.sandbox != "off" and self.executor.confinement is None:
            raise ConfigError(
                f'{self._where("sandbox")}bash-local sandbox "{config.sandbox}" needs the '
                "sandbox service: load the sandbox plugin and a mechanism (sandbox-linux), "
                "or set sandbox: off"
            )

    def _check_spill_dir(self) -> None:
        """A ``spill_dir`` must be a directory this process can make folders in (the
        spill folder is made there when a command's output first overflows): else
        every spill would fail with a warning and keep only the tail in memory."""
        config: LocalBashConfig = self.config
        folder = config.spill_dir
        if folder is None or config.spill_max_bytes == 0:
            return
        path = os.path.abspath(folder)  # as the spill folder is made: no `~` expansion
        if not os.path.isdir(path):
            if os.path.isfile(path):
                what = "is a regular file, not a directory"
            elif os.path.lexists(path):
                what = "is not a directory"
            else:
                what = "does not exist"
        elif not os.access(path, os.W_OK | os.X_OK):
            what = "is not writable by this process"
        else:
            return
        raise ConfigError(
            f'{self._where("spill_dir")}bash-local spill_dir "{path}" cannot be used: it '
            f"{what} (the spill folder of long outputs is made in it)"
        )
