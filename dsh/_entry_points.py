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

Within :func:`read_together` (``dsh.cli.main`` around one command), the first of its
groups asked for is read with the others in the same pass, and each other group's
entry points are handed to the next call that asks for it, once (docs/rfc/0050);
pydantic's group, when it is one of them, is handed to pydantic's plugin loader
(:mod:`dsh._pydantic_plugins`, docs/rfc/0055).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ._pydantic_plugins import PYDANTIC_GROUP, found_pydantic_plugins

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["entry_points", "read_together"]

_INFO_SUFFIXES = (".dist-info", ".egg-info")
_SEPARATORS = re.compile(r"[-_.]+")


class _Unusual(Exception):
    """An installation this reader does not know: ``importlib.metadata`` reads it."""


#: The groups the current :func:`read_together` block reads in one pass, until the
#: first of them is asked for (then empty).
_together: list[str] = []
#: The groups read with an earlier one, each with the ``sys.path`` it was read on.
_handed: dict[str, tuple[list[object], list[EntryPoint]]] = {}


@contextlib.contextmanager
def read_together(*groups: str) -> Iterator[None]:
    """Within the block, the first call of :func:`entry_points` for one of ``groups``
    reads all of them in one pass; a later call for another of them gets what that pass
    found (once, and only while ``sys.path`` is unchanged), and any call after that
    reads afresh. After the block nothing read is kept."""
    _together[:] = groups
    try:
        yield
    finally:
        _together.clear()
        _handed.clear()


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group``, as ``importlib.metadata.entry_points(group=group)``
    lists them (read afresh, except what :func:`read_together` hands on). The ``dist``
    of each is not set."""
    handed = _handed.pop(group, None)
    if handed is not None and handed[0] == sys.path:
        return handed[1]
    groups = list(_together) if group in _together else [group]
    _together.clear()
    try:
        found = _read(groups)
    except _Unusual:
        import importlib.metadata

        return list(importlib.metadata.entry_points(group=group))
    for other in groups:
        if other == PYDANTIC_GROUP:
            found_pydantic_plugins(found[other])
        elif other != group:
            _handed[other] = (list(sys.path), found[other])
    return found[group]


def _read(groups: list[str]) -> dict[str, list[EntryPoint]]:
    if any(
        hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder
        for finder in sys.meta_path
    ):
        raise _Unusual
    seen: set[str] = set()
    found: dict[str, list[EntryPoint]] = {group: [] for group in groups}
    for entry in sys.path:
        for info in _infos(entry):
            # The first distribution of a name on the path is the installed one.
            key = _normalized(info)
            if key in seen:
                continue
            seen.add(key)
            _groups_of(os.path.join(entry or ".", info), found)
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


def _groups_of(info: str, found: dict[str, list[EntryPoint]]) -> None:
    """Adds to ``found`` the entry points of its groups that the ``entry_points.txt`` in
    ``info`` declares (the sections and ``name = value`` lines as ``importlib.metadata``
    reads them)."""
    try:
        with open(os.path.join(info, "entry_points.txt"), encoding="utf-8") as file:
            text = file.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return
    if not any(group in text for group in found):
        return
    from importlib.metadata import EntryPoint

    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section in found:
            name, value = line.split("=", 1)
            found[section].append(EntryPoint(name=name.strip(), value=value.strip(), group=section))
