"""Data types and constants shared by the system prompt registry and its renderer.

All records are ordinary mutable dataclasses: built with keyword arguments, read and
written as attributes. They deliberately have no ``__slots__``, so a plugin may hang
extra attributes on an assembly or a context (the Python counterpart of the original's
declaration merging).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "TOOL_ORDER_REST",
    "VARIABLE_NAME",
    "AssembleContext",
    "AssembledSection",
    "PromptAssembly",
    "PromptSection",
    "TextFn",
    "ToolProvider",
    "ToolProviderResult",
    "ToolSchema",
    "VariableProvider",
]

TOOL_ORDER_REST = "<unlisted-tools>"
"""The placeholder in ``tool_order`` marking where tools it does not list are placed."""

VARIABLE_NAME = re.compile(r"[a-z][a-z0-9_]*")
"""Grammar of a prompt variable name. Always apply it with ``fullmatch``."""


@dataclass
class AssembleContext:
    """Describes whom one ``assemble()`` call is for.

    ``scope`` selects the scoped layer merged over the global one (``None``: global
    only). ``agent`` is the agent handle, set together with its scope by the agent
    plugin. Providers must cope with either being ``None``.
    """

    scope: object = None
    agent: object = None


TextFn: TypeAlias = Callable[[AssembleContext], str]
"""A section text computed afresh for each assembly."""


@dataclass
class PromptSection:
    """A section contributed to the registry; lower ``order`` renders earlier."""

    name: str
    order: float
    text: str | TextFn


@dataclass
class AssembledSection:
    """A section inside an assembly: its text is resolved but not yet interpolated."""

    name: str
    order: float
    text: str


@dataclass
class ToolSchema:
    """What the model is told about one tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class ToolProviderResult:
    """The answer of one tool provider for one assembly.

    ``schemas`` is the set visible to the assembly's scope after restrictions;
    ``known_names`` is the universe before restrictions that ``tool_order`` is checked
    against, and ``None`` means "the names in ``schemas``".
    """

    schemas: list[ToolSchema]
    known_names: list[str] | None = None


@dataclass
class PromptAssembly:
    """Everything the model is told for one step, before interpolation."""

    sections: list[AssembledSection]
    tools: list[ToolSchema]
    variables: dict[str, str | None]


ToolProvider: TypeAlias = Callable[[AssembleContext], ToolProviderResult]
"""Called once per assembly to contribute tool schemas."""

VariableProvider: TypeAlias = Callable[[AssembleContext], str | None]
"""Called once per assembly for a variable's value; ``None`` means no value this time."""
