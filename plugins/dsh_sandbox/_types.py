"""What an executor asks of a sandbox (:class:`SandboxPolicy`) and what it gets back
(:class:`Launch`), and the protocol of the mechanisms that answer."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ._errors import SandboxError

__all__ = ["MODES", "Launch", "SandboxMechanism", "SandboxMode", "SandboxPolicy"]

SandboxMode = Literal["read-only", "workspace-write"]

#: The modes a policy can have.
MODES: tuple[SandboxMode, ...] = ("read-only", "workspace-write")


@dataclass(frozen=True)
class SandboxPolicy:
    """What a confined command may do.

    ``mode`` ``read-only``: no write anywhere but ``/dev/null``; ``workspace-write``:
    writes only under ``writable_roots`` (absolute paths; ignored in ``read-only``).
    ``network`` False: no TCP connect or bind and no name resolution. ``deny_read``:
    globs in the form of ``fs-local``'s ``deny_read`` (``**/.env``, ``~/.ssh/**``,
    an absolute path) naming files the command cannot read. ``cwd``: the command's
    working directory (None: the executor's). Raises :class:`SandboxError` for a mode that is
    not one of :data:`MODES` or a relative writable root or cwd.
    """

    mode: SandboxMode
    writable_roots: tuple[str, ...] = ()
    network: bool = False
    deny_read: tuple[str, ...] = ()
    cwd: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SandboxError(f"invalid sandbox mode {self.mode!r}: expected one of {MODES}")
        for root in self.writable_roots:
            if not os.path.isabs(root):
                raise SandboxError(f"invalid writable root {root!r}: expected an absolute path")
        if self.cwd is not None and not os.path.isabs(self.cwd):
            raise SandboxError(f"invalid sandbox cwd {self.cwd!r}: expected an absolute path")


@dataclass(frozen=True, kw_only=True)
class Launch:
    """How an executor starts a confined command: ``argv(command)`` is what it runs,
    ``preexec`` (when set) runs in the child between fork and exec, ``pass_fds`` stay
    open in the child; ``mechanism`` names what confines it (``bubblewrap``,
    ``landlock``, ``unconfined``)."""

    mechanism: str
    argv_prefix: tuple[str, ...] = ()
    preexec: Callable[[], None] | None = None
    pass_fds: tuple[int, ...] = ()

    def argv(self, command: Sequence[str]) -> list[str]:
        """The program and arguments to start: the prefix, then ``command``."""
        return [*self.argv_prefix, *command]


@runtime_checkable
class SandboxMechanism(Protocol):
    """What confines commands on this machine (``sandbox-linux`` sets one)."""

    #: The mechanism's name (its plugin's YAML name, e.g. ``sandbox-linux``).
    name: str

    async def probe(self) -> str:
        """What would confine a command here (e.g. ``bubblewrap``); raises
        :class:`~dsh_sandbox.SandboxUnavailableError` naming what was tried."""
        ...

    async def wrap(self, policy: SandboxPolicy) -> Launch:
        """How to start a command under ``policy``; raises
        :class:`~dsh_sandbox.SandboxUnavailableError` naming what was tried."""
        ...
