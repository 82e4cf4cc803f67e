"""What ``deny_read`` covers: a rule per glob, and the files the rules match now, by
identity (device and inode), so that a hard link to a denied file is denied too."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from dsh_fs import compile_glob, split_glob

__all__ = ["SCAN_LIMIT", "DeniedFiles", "DenyRule", "inside"]

#: The most directory entries one rule's scan visits; a rule covering more cannot
#: rule out that a hard-linked file is one of its files, so such a file is refused.
SCAN_LIMIT = 10_000


def inside(path: str, directory: str) -> bool:
    """Whether the canonical ``path`` is ``directory`` or below it."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


@dataclass(frozen=True)
class DenyRule:
    """One ``deny_read`` glob: as configured (``pattern``), its literal directories
    canonicalised (``prefix``), the ``regex`` of the canonical paths it matches, and
    how deep below ``prefix`` a match can be (``None``: any depth)."""

    pattern: str
    prefix: str
    regex: re.Pattern[str]
    depth: int | None

    @classmethod
    def of(cls, pattern: str) -> DenyRule:
        """The rule of ``pattern`` (``~`` expanded), so it compares with canonical
        paths (a symlinked home still matches)."""
        literal, rest = split_glob(os.path.expanduser(pattern))
        prefix = os.path.realpath(literal)
        # Only "/" (or "**", which is unbounded) lets a match go one level deeper.
        depth = None if "**" in rest else rest.count("/") + 1
        return cls(pattern, prefix, compile_glob(os.path.join(prefix, rest)), depth)

    def may_match_under(self, directory: str) -> bool:
        """Whether a path below the canonical ``directory`` can match."""
        return inside(directory, self.prefix) or inside(self.prefix, directory)


@dataclass
class DeniedFiles:
    """The regular files the rules match, found by walking below each rule's prefix
    (no symlink followed): ``found`` maps ``(st_dev, st_ino)`` to ``(path, pattern)``;
    ``unsure`` holds the patterns whose walk stopped at :data:`SCAN_LIMIT` entries."""

    found: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)
    unsure: list[str] = field(default_factory=list)

    @classmethod
    def scan(cls, rules: list[DenyRule]) -> DeniedFiles:
        """The files ``rules`` match now."""
        files = cls()
        for rule in rules:
            files._scan(rule)
        return files

    def _scan(self, rule: DenyRule) -> None:
        budget = SCAN_LIMIT
        pending = [(rule.prefix, 1)]
        while pending:
            directory, depth = pending.pop()
            try:
                with os.scandir(directory) as it:
                    entries = list(it)
            except OSError:
                continue
            budget -= len(entries)
            if budget < 0:
                self.unsure.append(rule.pattern)
                return
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if rule.depth is None or depth < rule.depth:
                        pending.append((entry.path, depth + 1))
                elif entry.is_file(follow_symlinks=False) and rule.regex.fullmatch(entry.path):
                    st = entry.stat(follow_symlinks=False)
                    self.found[(st.st_dev, st.st_ino)] = (entry.path, rule.pattern)

    def reason(self, path: str, st: os.stat_result) -> str | None:
        """Why the file ``path`` (of status ``st``, with other hard links) may not be
        read, or ``None``."""
        denied = self.found.get((st.st_dev, st.st_ino))
        if denied is not None:
            other, pattern = denied
            return (
                f'cannot read "{path}": it is a hard link of "{other}", which matches the '
                f'deny_read pattern "{pattern}"'
            )
        if self.unsure:
            return (
                f'cannot read "{path}": it has {st.st_nlink} hard links, and the deny_read '
                f'pattern "{self.unsure[0]}" covers over {SCAN_LIMIT} files, too many to '
                "rule out that one of them is denied"
            )
        return None
