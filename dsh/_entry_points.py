"""The installed entry points of one group, read with one directory listing per
``sys.path`` entry (docs/rfc/0045).

``importlib.metadata.entry_points(group=...)`` builds a distribution object for every
installed package and reads each one's ``entry_points.txt`` through ``pathlib``: in an
environment with a few hundred packages that is most of a ``dsh run``'s own work. Where
every distribution is a ``*.dist-info`` or ``*.egg-info`` directory in a directory on
``sys.path`` (what pip and ``pip install -e`` make), :func:`entry_points` finds the same
entry points in the same order by reading only the ``entry_points.txt`` files that
mention the group; anywhere else (a zip file or an ``.egg`` on ``sys.path``, a finder of
its own on ``sys.meta_path``) it asks ``importlib.metadata``.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["entry_points"]

_INFO_SUFFIXES = (".dist-info", ".egg-info")
_SEPARATORS = re.compile(r"[-_.]+")


class _Unusual(Exception):
    """An installation this reader does not know: ``importlib.metadata`` reads it."""


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group``, as ``importlib.metadata.entry_points(group=group)``
    lists them (read afresh: nothing is cached). The ``dist`` of each is not set."""
    try:
        return _read(group)
    except _Unusual:
        import importlib.metadata

        return list(importlib.metadata.entry_points(group=group))


def _read(group: str) -> list[EntryPoint]:
    if any(
        hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder
        for finder in sys.meta_path
    ):
        raise _Unusual
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for entry in sys.path:
        for info in _infos(entry):
            # The first distribution of a name on the path is the installed one.
            key = _normalized(info)
            if key in seen:
                continue
            seen.add(key)
            found.extend(_group_of(os.path.join(entry or ".", info), group))
    return found


def _infos(entry: object) -> list[str]:
    """The metadata directories' names in one ``sys.path`` entry, in listing order."""
    if not isinstance(entry, str) or entry.lower().endswith(".egg"):
        raise _Unusual
    root = entry or "."
    try:
        children = os.listdir(root)
    except NotADirectoryError:  # a zip file
        raise _Unusual from None
    except OSError:  # missing or unreadable: importlib.metadata finds nothing there either
        return []
    infos = [child for child in children if child.lower().endswith(_INFO_SUFFIXES)]
    if any(not info.endswith(_INFO_SUFFIXES) for info in infos):
        raise _Unusual  # importlib.metadata would name it by its METADATA, not its directory
    return infos


def _normalized(info: str) -> str:
    """The distribution name a metadata directory stands for, normalized (PEP 503)."""
    name = info.rpartition(".")[0].partition("-")[0]
    return _SEPARATORS.sub("-", name).lower().replace("-", "_")


def _group_of(info: str, group: str) -> list[EntryPoint]:
    """The entry points of ``group`` that the ``entry_points.txt`` in ``info`` declares
    (the sections and ``name = value`` lines as ``importlib.metadata`` reads them)."""
    try:
        with open(os.path.join(info, "entry_points.txt"), encoding="utf-8") as file:
            text = file.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return []
    if group not in text:
        return []
    from importlib.metadata import EntryPoint

    found = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group:
            name, value = line.split("=", 1)
            found.append(EntryPoint(name=name.strip(), value=value.strip(), group=group))
    return found
