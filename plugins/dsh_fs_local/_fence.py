"""What ``fs-local`` lets the model read and change."""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

from dsh_fs import FsReadDeniedError, FsSandboxDeniedError, compile_glob, session_cwd, split_glob

from ._config import FsLocalConfig

__all__ = ["Fence", "inside"]


def inside(path: str, directory: str) -> bool:
    """Whether the canonical ``path`` is ``directory`` or below it."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _canonical_glob(pattern: str) -> str:
    """``pattern`` with ``~`` expanded and its literal directories canonicalised, so it
    compares with canonical targets (a symlinked home still matches)."""
    expanded = os.path.expanduser(pattern)
    prefix, rest = split_glob(expanded)
    return os.path.join(os.path.realpath(prefix), rest)


class Fence:
    """The mode, the workspace root, the temp dir and the ``deny_read`` globs."""

    def __init__(self, config: FsLocalConfig) -> None:
        self.mode = config.mode
        root = config.root
        self.root = None if root is None else os.path.realpath(os.path.expanduser(root))
        self.temp = os.path.realpath(tempfile.gettempdir())
        self.deny: list[tuple[str, re.Pattern[str]]] = [
            (pattern, compile_glob(_canonical_glob(pattern))) for pattern in config.deny_read
        ]

    def root_for(self, call: Any) -> str:
        """The workspace root for ``call``: the configured root, else its session cwd."""
        return self.root or os.path.realpath(session_cwd(call))

    def denied(self, target: str) -> str | None:
        """The ``deny_read`` pattern ``target`` matches, or ``None``."""
        for pattern, regex in self.deny:
            if regex.fullmatch(target):
                return pattern
        return None

    def check_read(self, target: str) -> None:
        pattern = self.denied(target)
        if pattern is not None:
            raise FsReadDeniedError(
                f'cannot read "{target}": it matches the deny_read pattern "{pattern}"', target
            )

    def check_write(self, target: str, call: Any) -> None:
        if self.mode == "read-only":
            raise FsSandboxDeniedError(
                f'cannot change "{target}": the filesystem is read-only (fs-local mode read-only)',
                target,
            )
        if self.mode == "full-access":
            return
        root = self.root_for(call)
        if not (inside(target, root) or inside(target, self.temp)):
            raise FsSandboxDeniedError(
                f'cannot change "{target}": it is outside the workspace "{root}" (fs-local '
                "mode workspace-write allows the workspace and the temp dir)",
                target,
            )
