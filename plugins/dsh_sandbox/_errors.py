"""Errors of the sandbox seam and of the mechanisms behind it."""

from __future__ import annotations

from dsh import DshError

__all__ = ["SandboxError", "SandboxUnavailableError"]


class SandboxError(DshError, RuntimeError):
    """The seam was misused: a second mechanism, something that is not a mechanism or
    not a policy, a policy with a bad mode or a relative path, or a mechanism that
    answered with something other than a ``Launch``."""

    code = "SANDBOX"


class SandboxUnavailableError(DshError, RuntimeError):
    """No command can be confined: no mechanism is set, or none of what the mechanism
    tried works on this machine (the message names each thing tried and why it failed)."""

    code = "SANDBOX_UNAVAILABLE"
