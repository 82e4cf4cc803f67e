"""What one scope's assemblies share until a registration changes: see RFC 0017.

A :class:`View` is the structure of a scope's prompt — its sections merged and sorted,
the tool providers — built once per change of the layers it reads. Values are never
cached: every variable provider, text function and tool provider is called by every
assembly. What the tool providers return is memoised by equality (:class:`ToolMemo`),
so their order and copies are made once per distinct result.

An assembly built from a view is a :class:`CachedAssembly`: its ``sections`` and
``tools`` lists are made on first access, from fresh objects as for any assembly, so an
assembly nobody reads is rendered straight from the view (``render_prompt``) and its
tools passed on without copies (:func:`read_tools`).
"""

from __future__ import annotations

import copy
import marshal
from typing import TYPE_CHECKING, Any

from ._types import AssembledSection, PromptAssembly, PromptSection, ToolProvider, ToolSchema

if TYPE_CHECKING:
    from ._render import _Plan

__all__ = ["CachedAssembly", "ToolMemo", "View", "read_tools", "shared_tool"]


class View:
    """One scope's prompt structure, valid while ``stamp`` matches its layers."""

    __slots__ = ("dynamic", "names", "orders", "plan", "stamp", "texts", "tool_memo", "tools")

    def __init__(
        self,
        stamp: tuple[int, int],
        sections: list[PromptSection],
        tools: tuple[ToolProvider, ...],
    ) -> None:
        self.stamp = stamp
        self.names = tuple(s.name for s in sections)
        self.orders = tuple(s.order for s in sections)
        #: Section texts in order; a text function stands at its place until called.
        self.texts: tuple[Any, ...] = tuple(s.text for s in sections)
        #: Where the text functions are.
        self.dynamic = tuple(i for i, s in enumerate(sections) if callable(s.text))
        #: The render plan of ``texts`` when it has no text function (made on first use).
        self.plan: _Plan | None = None
        self.tools = tools
        self.tool_memo: ToolMemo | None = None


class ToolMemo:
    """The ordered tools of one result of the providers, with what copies them."""

    __slots__ = ("blobs", "known", "schemas", "shared")

    def __init__(
        self, schemas: list[ToolSchema], known: list[str], ordered: list[ToolSchema]
    ) -> None:
        self.schemas = schemas
        self.known = known
        #: Plain schemas, one per ordered tool, shared by every assembly of this result.
        self.shared = tuple(shared_tool(schema) for schema in ordered)
        #: Each one's parameters marshalled (None: not marshal-able, deep-copied instead).
        self.blobs = tuple(_blob(schema.parameters) for schema in self.shared)


def shared_tool(schema: ToolSchema) -> ToolSchema:
    """A plain copy of ``schema`` (name, description, deep-copied parameters)."""
    return ToolSchema(
        name=schema.name, description=schema.description, parameters=_copy(schema.parameters)
    )


def _blob(parameters: Any) -> bytes | None:
    try:
        return marshal.dumps(parameters)
    except ValueError:
        return None


def _copy(value: Any) -> Any:
    """A deep copy of a tool's JSON Schema: ``marshal`` copies dicts, lists and scalars
    in C, several times faster than ``copy.deepcopy``, which takes anything else."""
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:
        return copy.deepcopy(value)


class CachedAssembly(PromptAssembly):
    """A :class:`PromptAssembly` whose lists are made on first access (fresh objects).

    Until ``sections`` is read, ``_dsh_unread`` holds the view the texts came from, so
    ``render_prompt`` renders without making the sections. Copies and pickles are plain
    assemblies; equality compares the three fields with any assembly.
    """

    @classmethod
    def build(
        cls,
        view: View,
        texts: tuple[Any, ...],
        variables: dict[str, str | None],
        tools: ToolMemo,
    ) -> CachedAssembly:
        assembly = object.__new__(cls)
        assembly.__dict__.update(
            variables=variables, _dsh_unread=view, _dsh_texts=texts, _dsh_tool_memo=tools
        )
        return assembly

    @property  # the dataclass field, made on first access
    def sections(self) -> list[AssembledSection]:
        state = self.__dict__
        made: list[AssembledSection] | None = state.get("_dsh_sections")
        if made is None:
            view: View = state.pop("_dsh_unread")
            made = state["_dsh_sections"] = list(
                map(AssembledSection, view.names, view.orders, state["_dsh_texts"])
            )
        return made

    @sections.setter
    def sections(self, value: list[AssembledSection]) -> None:
        self.__dict__.pop("_dsh_unread", None)
        self.__dict__["_dsh_sections"] = value

    @property  # the dataclass field, made on first access
    def tools(self) -> list[ToolSchema]:
        state = self.__dict__
        made: list[ToolSchema] | None = state.get("_dsh_tools")
        if made is None:
            made = state["_dsh_tools"] = _fresh_tools(state.pop("_dsh_tool_memo"))
        return made

    @tools.setter
    def tools(self, value: list[ToolSchema]) -> None:
        self.__dict__.pop("_dsh_tool_memo", None)
        self.__dict__["_dsh_tools"] = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PromptAssembly):
            return NotImplemented
        return (self.sections, self.tools, self.variables) == (
            other.sections,
            other.tools,
            other.variables,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass

    def __repr__(self) -> str:
        return (
            f"PromptAssembly(sections={self.sections!r}, tools={self.tools!r}, "
            f"variables={self.variables!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle see a plain assembly (extra attributes included).
        extra = {k: v for k, v in self.__dict__.items() if not k.startswith("_dsh_")}
        del extra["variables"]
        return (_plain, (self.sections, self.tools, self.variables), extra or None)


def _plain(
    sections: list[AssembledSection], tools: list[ToolSchema], variables: dict[str, str | None]
) -> PromptAssembly:
    return PromptAssembly(sections=sections, tools=tools, variables=variables)


def _fresh_tools(memo: ToolMemo) -> list[ToolSchema]:
    return [
        ToolSchema(
            name=schema.name,
            description=schema.description,
            parameters=copy.deepcopy(schema.parameters) if blob is None else marshal.loads(blob),
        )
        for schema, blob in zip(memo.shared, memo.blobs, strict=True)
    ]


def read_tools(assembly: PromptAssembly) -> tuple[ToolSchema, ...]:
    """The tools of ``assembly`` for reading only (building a model request).

    While nobody has read ``assembly.tools`` these are the schemas the assembly's view
    shares with other assemblies of the same tools: no copy is made, and they must not
    be mutated. Otherwise (a listener read or replaced the list, or the assembly was
    built by hand) it is ``tuple(assembly.tools)``.
    """
    memo: ToolMemo | None = assembly.__dict__.get("_dsh_tool_memo")
    return tuple(assembly.tools) if memo is None else memo.shared
