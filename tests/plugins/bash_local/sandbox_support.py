"""Helpers of the sandboxed-shell tests: a mechanism that records each policy (and
confines nothing), and runtimes with the sandbox seam, the shell and the tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from dsh import Context
from dsh_bash import Bash
from dsh_bash_local import LocalBash
from dsh_sandbox import Launch, Sandbox, SandboxPolicy, SandboxUnavailableError
from dsh_system_prompt import SystemPrompt
from dsh_tools import Tools

#: The variable the recording mechanism's argv prefix sets: a command that sees it ran
#: through the Launch.
SANDBOXED = "DSH_TEST_SANDBOXED"


class Recording:
    """A sandbox mechanism for wiring tests: it keeps each policy it is asked about and
    answers with ``launch(policy)`` (default: ``env DSH_TEST_SANDBOXED=1`` before the
    command), or raises ``SandboxUnavailableError(fail)``."""

    name = "recording"

    def __init__(
        self,
        launch: Callable[[SandboxPolicy], Launch] | None = None,
        *,
        fail: str | None = None,
    ) -> None:
        self.policies: list[SandboxPolicy] = []
        self.launch = launch or marked_launch
        self.fail = fail

    async def probe(self) -> str:
        return "recording"

    async def wrap(self, policy: SandboxPolicy) -> Launch:
        self.policies.append(policy)
        if self.fail is not None:
            raise SandboxUnavailableError(self.fail)
        return self.launch(policy)


def marked_launch(policy: SandboxPolicy) -> Launch:
    """A Launch that confines nothing but marks the command's environment."""
    return Launch(mechanism="recording", argv_prefix=("env", f"{SANDBOXED}=1"))


@asynccontextmanager
async def sandboxed_shell(
    mechanism: Recording | None = None, *, tools: bool = False, **local: Any
) -> AsyncIterator[tuple[Context, Recording]]:
    """A root with the sandbox seam and ``mechanism`` (default: a new
    :class:`Recording`), the system prompt and the tools service when ``tools``, the
    bash seam and ``bash-local`` with ``local`` (``sandbox: workspace-write`` unless
    given)."""
    mechanism = mechanism or Recording()
    async with Context() as root:
        if tools:
            await root.plugin(SystemPrompt)
            await root.plugin(Tools)
        await root.plugin(Sandbox)
        root.sandbox.set_mechanism(mechanism)
        await root.plugin(Bash)
        await root.plugin(LocalBash, {"sandbox": "workspace-write"} | local)
        yield root, mechanism
