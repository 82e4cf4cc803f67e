"""pydantic's plugins, found in dsh's own pass over the installed distributions
(docs/rfc/0055).

pydantic looks for its plugins (the ``pydantic`` entry-point group) when the first model
is built, with ``importlib.metadata``, which reads every installed distribution. The
group is read with dsh's own groups in :func:`dsh._entry_points.read_together`'s pass;
when that pass finds no pydantic plugin, pydantic's loader is told so, through the
cache it keeps for the process, and does not read the distributions again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["PYDANTIC_GROUP", "found_pydantic_plugins"]

#: The entry-point group of pydantic's plugins.
PYDANTIC_GROUP = "pydantic"


def found_pydantic_plugins(found: list[EntryPoint]) -> None:
    """With ``found`` empty, pydantic's plugin loader keeps "no plugins" as what it
    would have found itself. It is left alone, to load them as it always does, when
    there is a plugin, when it has already looked (or is looking), or when it keeps no
    such cache (a pydantic other than the one this was written for)."""
    if found:
        return
    from pydantic.plugin import _loader

    if (
        getattr(_loader, "_plugins", ()) is None
        and getattr(_loader, "_loading_plugins", None) is False
    ):
        _loader._plugins = {}
