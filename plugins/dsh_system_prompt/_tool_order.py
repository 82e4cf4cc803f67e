"""Canonical model-facing order of the collected tool schemas.

Without a ``tool_order`` the tools are sorted by name; with one, listed tools take their
listed places and the rest are slotted in, sorted by name, at the ``TOOL_ORDER_REST``
entry. Names compare by UTF-16 code units, as JavaScript strings do, so the order is
the same as the original's on every machine and for every script.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._errors import ToolOrderError
from ._types import TOOL_ORDER_REST, ToolSchema

__all__ = ["check_tool_order", "order_tools"]


def _name_key(name: str) -> bytes:
    # Big-endian UTF-16 bytes order exactly like the code units they encode;
    # "surrogatepass" keeps a lone surrogate comparable instead of failing.
    return name.encode("utf-16-be", "surrogatepass")


def _tool_key(tool: ToolSchema) -> bytes:
    return _name_key(tool.name)


def check_tool_order(tool_order: list[str]) -> None:
    """Validate the shape of a ``tool_order`` list.

    A name may appear once only (the first repeat found is reported), and the list must
    hold the ``TOOL_ORDER_REST`` entry. Whether listed tools exist is checked at
    assembly time by :func:`order_tools`, once the providers are known.
    """
    seen: set[str] = set()
    for name in tool_order:
        if name in seen:
            raise ToolOrderError(f'tool_order lists "{name}" more than once')
        seen.add(name)
    if TOOL_ORDER_REST not in seen:
        raise ToolOrderError(
            f'tool_order must contain the "{TOOL_ORDER_REST}" rest entry '
            "(where unlisted tools are inserted)"
        )


def order_tools(
    tools: list[ToolSchema], known_names: Iterable[str], tool_order: list[str] | None
) -> list[ToolSchema]:
    """Return ``tools`` in model-facing order, as a new list (the input is not touched).

    ``known_names`` is the pre-restriction universe: a listed name must belong to it, but
    a known tool that no provider returned this time is simply left out. Sorting is
    stable, so same-named tools keep their collection order. Raises
    :class:`ToolOrderError` for a tool named ``TOOL_ORDER_REST`` (with or without a
    ``tool_order``), for a malformed ``tool_order``, and for listed unknown names.
    """
    if any(tool.name == TOOL_ORDER_REST for tool in tools):
        raise ToolOrderError(
            f'tool provider returned reserved tool name "{TOOL_ORDER_REST}" '
            "(reserved for tool_order's rest entry)"
        )
    if tool_order is None:
        return sorted(tools, key=_tool_key)
    check_tool_order(tool_order)
    known = set(known_names)
    unknown = [name for name in tool_order if name != TOOL_ORDER_REST and name not in known]
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        listed_unknown = ", ".join(f'"{name}"' for name in unknown)
        known_text = ", ".join(sorted(known, key=_name_key)) or "(none)"
        raise ToolOrderError(
            f"tool_order lists unregistered tool{plural} {listed_unknown}; "
            f"known tools: {known_text}"
        )
    listed = set(tool_order)
    by_name: dict[str, list[ToolSchema]] = {}
    unlisted: list[ToolSchema] = []
    for tool in tools:
        if tool.name in listed:
            by_name.setdefault(tool.name, []).append(tool)
        else:
            unlisted.append(tool)
    ordered: list[ToolSchema] = []
    for name in tool_order:
        if name == TOOL_ORDER_REST:
            ordered.extend(sorted(unlisted, key=_tool_key))
        else:
            ordered.extend(by_name.get(name, ()))
    return ordered
