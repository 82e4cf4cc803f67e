"""What the model is told about the sandbox its commands run in."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_bash import BashSandbox

__all__ = ["LEAVE_SENTENCE", "sandbox_guidance"]

#: How to leave the sandbox, closing the guidance of a sandboxed deployment.
LEAVE_SENTENCE = (
    "When a command fails only because of the sandbox and must run outside it, call bash "
    "again with `unsandboxed: true`; the user is asked to allow it and may decline, so "
    "say why in `description`."
)


def sandbox_guidance(sandbox: BashSandbox) -> str:
    """The sentences on ``sandbox`` that follow the tool's guidance: what commands may
    write, whether they reach the network, what they cannot read, how to leave it."""
    if sandbox.mode == "read-only" or not sandbox.writable_roots:
        writes = (
            "Commands run in a read-only sandbox: they cannot create, change or delete "
            "any file (a write fails with `Read-only file system` or `Permission denied`)."
        )
    else:
        writes = (
            "Commands run in a sandbox: they can write only in "
            f"{_listing(_root(root) for root in sandbox.writable_roots)} (elsewhere a write "
            "fails with `Read-only file system` or `Permission denied`)."
        )
    network = (
        "They may use the network."
        if sandbox.network
        else "The network is off: connections and name lookups fail."
    )
    parts = [writes, network]
    if sandbox.deny_read:
        globs = _listing(f"`{glob}`" for glob in sandbox.deny_read)
        parts.append(f"Files matching {globs} cannot be read.")
    parts.append(LEAVE_SENTENCE)
    return " ".join(parts)


def _root(root: str) -> str:
    if root == ".":
        return "the session's working directory"
    if root.startswith(("/", "~")):
        return f"`{root}`"
    return f"`{root}` (in the session's working directory)"


def _listing(items: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c`` (never empty)."""
    *rest, last = items
    return f"{', '.join(rest)} and {last}" if rest else last
