"""The ``sandbox-linux`` plugin: bubblewrap or Landlock behind the ``sandbox`` seam."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import anyio

from dsh import Context, Plugin
from dsh_sandbox import Launch, SandboxPolicy, SandboxUnavailableError

from . import _syscalls
from ._bubblewrap import HOSTS, bwrap_argv, find_bwrap
from ._config import SandboxLinuxConfig
from ._landlock import Rulesets
from ._paths import denied_paths

__all__ = ["SandboxLinux"]

#: The flags of bubblewrap's probe: what the strictest policy needs.
PROBE_FLAGS = ("--unshare-pid", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev")


@dataclass(frozen=True)
class _Choice:
    """What confines commands here: ``mechanism``, with bwrap's ``binary`` or
    Landlock's ``abi``; ``tried`` says why the others did not (for a fallback)."""

    mechanism: str
    binary: str = ""
    abi: int = 0
    tried: str = ""


class SandboxLinux(Plugin):
    """Confines the commands of the ``sandbox`` seam with bubblewrap or Landlock.

    Which one is found on first use (``dsh check``, the first ``wrap``), by running
    ``bwrap ... true`` once and asking the kernel for its Landlock ABI; the answer (or
    the failure, naming each thing tried) is kept for the plugin's life.
    """

    name = "sandbox-linux"
    Config = SandboxLinuxConfig
    inject = ("sandbox",)

    config: SandboxLinuxConfig

    def __init__(self, ctx: Context, config: SandboxLinuxConfig) -> None:
        super().__init__(ctx, config)
        self._lock = anyio.Lock()
        #: What was found: the choice, or why nothing works (the error's message).
        self._choice: _Choice | str | None = None
        self._rulesets = Rulesets()

    async def setup(self) -> AsyncIterator[Callable[[], object]]:
        if self.config.fallback == "unconfined":
            choice = await self._choose()
            if choice.mechanism == "unconfined":
                self.ctx.logger.warning(
                    "sandbox-linux: commands run UNCONFINED (fallback: unconfined): %s",
                    choice.tried,
                )
        yield self._rulesets.clear
        yield self.ctx.sandbox.set_mechanism(self)

    async def probe(self) -> str:
        """``bubblewrap``, ``landlock`` or (with ``fallback: unconfined``)
        ``unconfined``; raises :class:`SandboxUnavailableError` naming what was tried."""
        return (await self._choose()).mechanism

    async def wrap(self, policy: SandboxPolicy) -> Launch:
        """The launch confining a command by ``policy`` with the mechanism found."""
        choice = await self._choose()
        if choice.mechanism == "unconfined":
            return Launch(mechanism="unconfined")
        if choice.mechanism == "landlock":
            return await anyio.to_thread.run_sync(self._landlock, choice.abi, policy)
        writable, denied = await anyio.to_thread.run_sync(_paths_of, policy)
        # bwrap's own --die-with-parent follows the *thread* that started it: trio starts
        # processes from worker threads that end when idle, so there only the lifeline
        # (which kills the group and every marked process) ties the command to dsh.
        on_trio = anyio.get_cancelled_exc_class().__module__.startswith("trio")
        prefix = bwrap_argv(choice.binary, policy, writable, denied, die_with_parent=not on_trio)
        return Launch(mechanism="bubblewrap", argv_prefix=prefix)

    def _landlock(self, abi: int, policy: SandboxPolicy) -> Launch:
        """In a worker thread: the paths, then the ruleset (built, or reused)."""
        writable, denied = _paths_of(policy)
        return self._rulesets.launch(abi, policy, writable, denied)

    async def _choose(self) -> _Choice:
        async with self._lock:
            if self._choice is None:
                self._choice = await self._find()
            choice = self._choice
        if isinstance(choice, str):
            raise SandboxUnavailableError(choice)
        return choice

    async def _find(self) -> _Choice | str:
        wanted = self.config.mechanism
        tried: list[str] = []
        if wanted in ("auto", "bubblewrap"):
            binary, why = await self._bubblewrap()
            if binary is not None:
                return _Choice("bubblewrap", binary=binary)
            tried.append(f"bubblewrap: {why}")
        if wanted in ("auto", "landlock"):
            try:
                return _Choice("landlock", abi=_syscalls.landlock_abi())
            except OSError as exc:
                tried.append(f"landlock: the kernel has no Landlock ({exc.strerror})")
        reasons = "; ".join(tried)
        if self.config.fallback == "unconfined":
            return _Choice("unconfined", tried=reasons)
        return f"sandbox-linux cannot confine commands (mechanism: {wanted}); tried {reasons}"

    async def _bubblewrap(self) -> tuple[str | None, str]:
        binary, where = find_bwrap(self.config.bwrap_path)
        if binary is None:
            return None, where
        argv = [binary, *PROBE_FLAGS, "--", "true"]
        try:
            result = await anyio.run_process(argv, check=False)
        except OSError as exc:
            return None, f"{where} cannot run: {exc.strerror}"
        if result.returncode != 0:
            said = result.stderr.decode(errors="replace").strip() or "nothing"
            return None, f"{where} fails its probe (exit {result.returncode}): {said}"
        return binary, where


def _paths_of(policy: SandboxPolicy) -> tuple[list[str], list[str]]:
    """The canonical writable roots that exist (none in ``read-only``), and the denied
    paths: ``deny_read``'s, and the hosts file when the network is off."""
    writable: list[str] = []
    if policy.mode == "workspace-write":
        writable = sorted({os.path.realpath(root) for root in policy.writable_roots})
        writable = [root for root in writable if os.path.isdir(root)]
    patterns = list(policy.deny_read)
    if not policy.network:
        patterns.append(HOSTS)
    return writable, denied_paths(patterns)
