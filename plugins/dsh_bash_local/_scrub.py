"""Which inherited variables are secrets: by name (parts and glob patterns) and by value
(a URL that carries a password)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

__all__ = ["Scrub"]

#: A URL with a password in it: ``scheme://user:password@`` (the user may be empty).
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:[^\s/?#@]+@")

_GLOB = frozenset("*?[")


class Scrub:
    """Tells secrets from the rest: a name matches an entry of ``names`` (compared in
    upper case) when the entry is part of it or, for an entry with ``*``, ``?`` or
    ``[``, when it matches the whole name as a glob; with ``urls``, a value holding a
    URL with a password is a secret whatever its name."""

    def __init__(self, names: Iterable[str], *, urls: bool) -> None:
        entries = [entry.upper() for entry in names]
        self._globs = tuple(entry for entry in entries if _GLOB & set(entry))
        self._parts = tuple(entry for entry in entries if not _GLOB & set(entry))
        self._urls = urls

    def secret(self, name: str, value: str) -> bool:
        """Whether the variable ``name=value`` is kept from commands."""
        upper = name.upper()
        if any(part in upper for part in self._parts):
            return True
        if any(fnmatch.fnmatchcase(upper, glob) for glob in self._globs):
            return True
        return self._urls and _URL_PASSWORD.search(value) is not None
