"""``.gitignore`` rules, read with the ``pathspec`` library, whether or not the folder
is a git work tree."""

from __future__ import annotations

import os

from pathspec import GitIgnoreSpec

__all__ = ["Ignores", "load_ignores"]

#: The ``.gitignore`` files in force for a directory: ``(directory, rules)``, from the
#: shallowest; a deeper file overrides a shallower one.
Ignores = tuple[tuple[str, GitIgnoreSpec], ...]


def _rules(directory: str) -> GitIgnoreSpec | None:
    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    return GitIgnoreSpec.from_lines(lines)


def with_directory(ignores: Ignores, directory: str) -> Ignores:
    """``ignores`` plus the ``.gitignore`` of ``directory``, if it has one."""
    rules = _rules(directory)
    return ignores if rules is None else (*ignores, (directory, rules))


def load_ignores(directory: str) -> Ignores:
    """The rules in force for the canonical ``directory`` from its ancestors: those of
    the enclosing git work tree (the nearest ancestor holding ``.git``) down to
    ``directory``'s parent; none outside a work tree."""
    ancestors: list[str] = []
    current = directory
    while True:
        parent = os.path.dirname(current)
        if os.path.exists(os.path.join(current, ".git")):
            break
        if parent == current:
            return ()
        ancestors.append(parent)
        current = parent
    ignores: Ignores = ()
    for ancestor in reversed(ancestors):
        ignores = with_directory(ignores, ancestor)
    return ignores


def ignored(ignores: Ignores, path: str, is_dir: bool) -> bool:
    """Whether the canonical ``path`` is excluded by ``ignores``."""
    for base, rules in reversed(ignores):
        relative = path[len(base.rstrip("/")) + 1 :]
        result = rules.check_file(relative + "/" if is_dir else relative)
        if result.include is not None:
            return result.include
    return False
