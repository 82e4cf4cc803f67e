"""What ``bash-local`` asks the ``sandbox`` service for: one policy per command."""

from __future__ import annotations

import os
from typing import Any

from dsh_bash import BashRequest, BashSandbox
from dsh_sandbox import Launch, SandboxPolicy

from ._config import LocalBashConfig

__all__ = ["Confinement"]


class Confinement:
    """The sandbox of ``bash-local`` (``sandbox`` not ``off``): the policy of each
    command and the :class:`~dsh_sandbox.Launch` the ``sandbox`` service makes of it."""

    def __init__(self, config: LocalBashConfig, service: Any) -> None:
        assert config.sandbox != "off"
        self.mode = config.sandbox
        self.network = config.network
        self.roots = tuple(config.writable_roots) if self.mode == "workspace-write" else ()
        self.deny_read = tuple(config.deny_read)
        self.service = service

    def describe(self) -> BashSandbox:
        """What the tool tells the model (the roots as configured)."""
        return BashSandbox(
            mode=self.mode,
            writable_roots=self.roots,
            network=self.network,
            deny_read=self.deny_read,
        )

    def policy(self, request: BashRequest) -> SandboxPolicy:
        """``request``'s policy: the writable roots taken from its session's working
        directory (else its own, else this process's), canonical, each once."""
        base = request.session_cwd or request.cwd or os.getcwd()
        roots = (os.path.realpath(os.path.join(base, os.path.expanduser(r))) for r in self.roots)
        return SandboxPolicy(
            mode=self.mode,
            writable_roots=tuple(dict.fromkeys(roots)),
            network=self.network,
            deny_read=self.deny_read,
            cwd=None if request.cwd is None else os.path.abspath(request.cwd),
        )

    async def launch(self, request: BashRequest) -> Launch:
        """How to start ``request``'s command; raises what the service's ``wrap`` raises
        (``SandboxUnavailableError``)."""
        launch: Launch = await self.service.wrap(self.policy(request))
        return launch
