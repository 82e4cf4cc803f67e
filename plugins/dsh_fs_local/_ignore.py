"""``.gitignore`` rules, read with the ``pathspec`` library, whether or not the folder
is a git work tree."""

from __future__ import annotations

import os
import stat

from pathspec import GitIgnoreSpec

from ._paths import read_all

__all__ = ["Ignores", "load_ignores"]

#: The ``.gitignore`` files in force for a directory: ``(directory, rules)``, from the
#: shallowest; a deeper file overrides a shallower one.
Ignores = tuple[tuple[str, GitIgnoreSpec], ...]


_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def _rules(directory: str, fd: int | None = None) -> GitIgnoreSpec | None:
    """The rules of the ``.gitignore`` of ``directory`` (opened at ``fd`` when given),
    if it is a regular file: a symlink or a FIFO by that name is not followed."""
    name = ".gitignore" if fd is not None else os.path.join(directory, ".gitignore")
    try:
        file = os.open(name, _OPEN, dir_fd=fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(file).st_mode):
            return None
        text = read_all(file).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(file)
    return GitIgnoreSpec.from_lines(text.splitlines())


def with_directory(ignores: Ignores, directory: str, fd: int | None = None) -> Ignores:
    """``ignores`` plus the ``.gitignore`` of ``directory`` (opened at ``fd``), if it
    has one."""
    rules = _rules(directory, fd)
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
