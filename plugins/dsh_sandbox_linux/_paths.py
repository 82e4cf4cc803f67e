"""The canonical paths a policy's ``deny_read`` globs cover now, for mechanisms that
name paths (a bind mount, a Landlock rule) rather than match globs."""

from __future__ import annotations

import os
from collections.abc import Iterable

from dsh_fs import compile_glob, split_glob

__all__ = ["SCAN_LIMIT", "denied_paths"]

#: The most directory entries one glob's walk visits; past it the glob's whole literal
#: directory is denied (more than it names, never less).
SCAN_LIMIT = 10_000


def denied_paths(patterns: Iterable[str]) -> list[str]:
    """The canonical paths that ``patterns`` (absolute or ``~`` globs) cover: a glob
    whose rest is ``**`` (or nothing) covers its literal directory itself; otherwise the
    files and directories below it that match now (a matched directory is covered
    whole). No symlink is followed in the walk."""
    found: set[str] = set()
    for pattern in patterns:
        literal, rest = split_glob(os.path.expanduser(pattern))
        prefix = os.path.realpath(literal)
        if rest in ("", "**"):
            if os.path.lexists(prefix):
                found.add(prefix)
            continue
        found.update(_matches(prefix, rest))
    return sorted(found)


def _matches(prefix: str, rest: str) -> list[str]:
    regex = compile_glob(os.path.join(prefix, rest))
    # how deep below the prefix a match can be: only "**" is unbounded
    depth = None if "**" in rest else rest.count("/") + 1
    budget = SCAN_LIMIT
    matched: list[str] = []
    pending = [(prefix, 1)]
    while pending:
        directory, level = pending.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError:  # not a directory, gone, or unreadable to dsh too
            continue
        budget -= len(entries)
        if budget < 0:
            return [prefix]
        for entry in entries:
            if regex.fullmatch(entry.path):
                matched.append(os.path.realpath(entry.path))
            elif entry.is_dir(follow_symlinks=False) and (depth is None or level < depth):
                pending.append((entry.path, level + 1))
    return matched
