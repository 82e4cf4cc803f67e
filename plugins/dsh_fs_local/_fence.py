"""What ``fs-local`` lets the model read and change."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from dsh_fs import FsReadDeniedError, FsSandboxDeniedError, session_cwd

from ._config import FsLocalConfig
from ._deny import DeniedFiles, DenyRule, inside
from ._paths import canonical

__all__ = ["Fence"]


class Fence:
    """The mode, the workspace root, the temp dir and the ``deny_read`` globs."""

    def __init__(self, config: FsLocalConfig) -> None:
        self.mode = config.mode
        root = config.root
        self.root = None if root is None else os.path.realpath(os.path.expanduser(root))
        self.temp = os.path.realpath(tempfile.gettempdir())
        self.rules = [DenyRule.of(pattern) for pattern in config.deny_read]

    def root_for(self, call: Any) -> str:
        """The workspace root for ``call``: the configured root, else its session cwd."""
        return self.root or canonical(session_cwd(call))

    def denied(self, target: str) -> str | None:
        """The ``deny_read`` pattern the canonical ``target`` matches, or ``None``."""
        for rule in self.rules:
            if rule.regex.fullmatch(target):
                return rule.pattern
        return None

    def screen(self, directory: str) -> Callable[[str], object] | None:
        """What the paths of the entries of the canonical ``directory`` must not
        satisfy (a true value: denied), or ``None`` when no rule can match there."""
        regexes = [rule.regex for rule in self.rules if rule.may_match_under(directory)]
        if not regexes:
            return None
        if len(regexes) == 1:
            return regexes[0].fullmatch
        return lambda path: any(regex.fullmatch(path) for regex in regexes)

    def denied_files(self) -> DeniedFiles:
        """The files the rules match now, by identity (a scan: call once per use)."""
        return DeniedFiles.scan(self.rules)

    def check_read(self, target: str) -> None:
        pattern = self.denied(target)
        if pattern is not None:
            raise FsReadDeniedError(
                f'cannot read "{target}": it matches the deny_read pattern "{pattern}"', target
            )

    def check_opened(self, path: str, st: os.stat_result) -> None:
        """Refuse the regular file opened at the canonical ``path`` (status ``st``, from
        the descriptor) when its path is denied, or when it is a hard link of a denied
        file (a file with one link has no other name to check)."""
        self.check_read(path)
        if st.st_nlink > 1:
            reason = self.denied_files().reason(path, st)
            if reason is not None:
                raise FsReadDeniedError(reason, path)

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
