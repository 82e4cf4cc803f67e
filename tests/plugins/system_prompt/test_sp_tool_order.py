"""Tests for ``tool_order`` validation and the canonical ordering of tool schemas."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh._errors import DshError
from dsh_system_prompt._errors import (
    PromptRegistrationError,
    PromptRenderError,
    SectionOrderError,
    ToolOrderError,
)
from dsh_system_prompt._tool_order import check_tool_order, order_tools
from dsh_system_prompt._types import TOOL_ORDER_REST as REST
from dsh_system_prompt._types import ToolProviderResult, ToolSchema

RESERVED = (
    'tool provider returned reserved tool name "<unlisted-tools>" '
    "(reserved for tool_order's rest entry)"
)
NO_REST = (
    'tool_order must contain the "<unlisted-tools>" rest entry (where unlisted tools are inserted)'
)


def tool(name: str, description: str = "", **parameters: Any) -> ToolSchema:
    return ToolSchema(name=name, description=description or name, parameters=dict(parameters))


def tools(*names: str) -> list[ToolSchema]:
    return [tool(name) for name in names]


def schema_names(schemas: list[ToolSchema]) -> list[str]:
    return [schema.name for schema in schemas]


def order_error(
    schemas: list[ToolSchema], known: list[str] | set[str], tool_order: list[str] | None
) -> str:
    with pytest.raises(ToolOrderError) as info:
        order_tools(schemas, known, tool_order)
    return str(info.value)


# --- check_tool_order (scenario 31) ------------------------------------------------------


def test_rest_constant() -> None:
    # Scenario 25, first half.
    assert REST == "<unlisted-tools>"


@pytest.mark.parametrize("tool_order", [[], ["bash", "todo_write"]])
def test_tool_order_without_rest_entry_is_rejected(tool_order: list[str]) -> None:
    with pytest.raises(ToolOrderError, match=re.escape(NO_REST)):
        check_tool_order(tool_order)


@pytest.mark.parametrize(
    ("tool_order", "repeated"),
    [
        (["bash", "bash", REST], "bash"),
        ([REST, "bash", REST], REST),
        (["bash", "bash"], "bash"),  # duplicates are reported before the missing rest entry
        (["a", "b", "b", "a", REST], "b"),  # the first repeat in list order
    ],
)
def test_tool_order_with_duplicates_is_rejected(tool_order: list[str], repeated: str) -> None:
    with pytest.raises(ToolOrderError) as info:
        check_tool_order(tool_order)
    assert str(info.value) == f'tool_order lists "{repeated}" more than once'


@pytest.mark.parametrize("tool_order", [[REST], ["a", REST, "b"], [REST, "z", "a"]])
def test_valid_tool_order_passes(tool_order: list[str]) -> None:
    check_tool_order(tool_order)  # raises on failure
    known = [name for name in tool_order if name != REST]
    assert schema_names(order_tools(tools(*known), known, tool_order)) == known


# --- reserved name (scenario 28) -----------------------------------------------------


@pytest.mark.parametrize("tool_order", [None, [REST], ["bash", REST]])
def test_reserved_tool_name_is_rejected(tool_order: list[str] | None) -> None:
    schemas = tools("bash", REST)
    assert order_error(schemas, ["bash", REST], tool_order) == RESERVED


# --- default order -------------------------------------------------------------------


def test_default_order_is_lexicographic() -> None:
    # Scenario 25, second half.
    result = order_tools(tools("charlie", "alpha", "bravo"), [], None)
    assert schema_names(result) == ["alpha", "bravo", "charlie"]


def test_default_order_compares_utf16_code_units() -> None:
    # U+FF61 is below U+1F600 as a code point but above its surrogates as UTF-16.
    schemas = tools("\uff61", "ab", "a\x00", "\U0001f600", "a", "B")
    result = order_tools(schemas, [], None)
    assert schema_names(result) == ["B", "a", "a\x00", "ab", "\U0001f600", "\uff61"]


def test_default_order_tolerates_lone_surrogates() -> None:
    result = order_tools(tools("\ude00", "\ud83d", "z"), [], None)
    assert schema_names(result) == ["z", "\ud83d", "\ude00"]


def test_default_order_is_stable() -> None:
    # Scenario 29.
    schemas = [tool("dup", "first"), tool("anchor"), tool("dup", "second")]
    result = order_tools(schemas, [], None)
    assert [t.description for t in result] == ["anchor", "first", "second"]


def test_result_is_a_new_list_and_input_is_untouched() -> None:
    schemas = tools("b", "a")
    for tool_order in (None, [REST]):
        result = order_tools(schemas, ["a", "b"], tool_order)
        assert result is not schemas
        assert schema_names(result) == ["a", "b"]
        assert schema_names(schemas) == ["b", "a"]


# --- explicit order ------------------------------------------------------------------


def test_listed_tools_take_listed_places_and_rest_is_sorted() -> None:
    # Scenario 26.
    schemas = tools("bash", "echo_b", "todo_write", "echo_a")
    result = order_tools(schemas, schema_names(schemas), ["todo_write", REST, "bash"])
    assert schema_names(result) == ["todo_write", "echo_a", "echo_b", "bash"]


@pytest.mark.parametrize(
    ("tool_order", "expected"),
    [
        ([REST, "a"], ["b", "c", "a"]),
        (["c", "a", REST], ["c", "a", "b"]),
        ([REST], ["a", "b", "c"]),
    ],
)
def test_rest_entry_position(tool_order: list[str], expected: list[str]) -> None:
    assert schema_names(order_tools(tools("c", "b", "a"), ["a", "b", "c"], tool_order)) == expected


def test_same_named_tools_keep_collection_order_at_listed_place() -> None:
    schemas = [tool("dup", "first"), tool("anchor"), tool("dup", "second"), tool("other")]
    result = order_tools(schemas, ["dup", "anchor", "other"], ["dup", REST])
    assert [t.description for t in result] == ["first", "second", "anchor", "other"]


def test_rest_entry_sort_is_stable() -> None:
    schemas = [tool("dup", "first"), tool("anchor"), tool("dup", "second"), tool("top")]
    result = order_tools(schemas, ["dup", "anchor", "top"], ["top", REST])
    assert [t.description for t in result] == ["top", "anchor", "first", "second"]


def test_known_but_absent_tool_is_skipped() -> None:
    # Scenario 38: bash is known before restriction but not visible in this scope.
    provided = ToolProviderResult(schemas=tools("read"), known_names=["read", "bash"])
    assert provided.known_names is not None
    result = order_tools(provided.schemas, provided.known_names, ["bash", REST])
    assert schema_names(result) == ["read"]


def test_tool_objects_pass_through_unchanged() -> None:
    original = tool("bash", "run", type="object", properties={"cmd": {"type": "string"}})
    (result,) = order_tools([original], {"bash"}, ["bash", REST])
    assert result is original
    assert result.parameters == {"type": "object", "properties": {"cmd": {"type": "string"}}}


def test_provider_result_known_names_default_to_none() -> None:
    assert ToolProviderResult(schemas=[]).known_names is None


# --- unknown names in tool_order (scenarios 27 and 38) ----------------------------------


def test_several_unknown_names_are_listed_in_tool_order_order() -> None:
    schemas = tools("bash", "todo_write")
    message = order_error(schemas, ["todo_write", "bash"], ["todo_write", "ghost", REST, "wraith"])
    assert message == (
        'tool_order lists unregistered tools "ghost", "wraith"; known tools: bash, todo_write'
    )


def test_single_unknown_name_with_no_tools() -> None:
    assert order_error([], [], ["ghost", REST]) == (
        'tool_order lists unregistered tool "ghost"; known tools: (none)'
    )


def test_unknown_name_lists_known_names_sorted_and_deduplicated() -> None:
    known = ["read", "bash", "read", "\U0001f600", "\uff61", "Zed"]
    message = order_error(tools("read"), known, ["basj", REST])
    assert message == (
        'tool_order lists unregistered tool "basj"; '
        "known tools: Zed, bash, read, \U0001f600, \uff61"
    )


def test_known_names_are_checked_not_visible_schemas() -> None:
    # A visible schema outside the known universe does not make its name listable.
    message = order_error(tools("bash"), ["read"], ["bash", REST])
    assert message == 'tool_order lists unregistered tool "bash"; known tools: read'


def test_order_tools_also_validates_tool_order_shape() -> None:
    assert order_error(tools("a"), ["a"], ["a"]) == NO_REST
    assert order_error(tools("a"), ["a"], ["a", "a", REST]) == 'tool_order lists "a" more than once'


# --- property: matches a direct transcription of the original ---------------------------

_NAMES = st.sampled_from(["a", "b", "c", "B", "\U0001f600", "\uff61", "aa"])


def _reference_order(
    schemas: list[ToolSchema], known: set[str], tool_order: list[str]
) -> list[ToolSchema]:
    """The original algorithm: a quadratic filter per listed name."""
    from functools import cmp_to_key

    def compare(x: ToolSchema, y: ToolSchema) -> int:
        a = x.name.encode("utf-16-be", "surrogatepass")
        b = y.name.encode("utf-16-be", "surrogatepass")
        return -1 if a < b else (1 if a > b else 0)

    rest = sorted((t for t in schemas if t.name not in tool_order), key=cmp_to_key(compare))
    out: list[ToolSchema] = []
    for name in tool_order:
        out.extend(rest if name == REST else [t for t in schemas if t.name == name])
    return out


@given(
    schema_names=st.lists(_NAMES, max_size=12),
    extra_known=st.lists(_NAMES, max_size=3),
    listed=st.lists(_NAMES, unique=True, max_size=5),
    rest_at=st.integers(min_value=0, max_value=5),
)
def test_explicit_order_matches_reference(
    schema_names: list[str], extra_known: list[str], listed: list[str], rest_at: int
) -> None:
    schemas = [tool(name, f"#{i}") for i, name in enumerate(schema_names)]
    known = set(schema_names) | set(extra_known)
    tool_order = [*listed]
    tool_order.insert(min(rest_at, len(tool_order)), REST)
    if any(name not in known for name in listed):
        with pytest.raises(ToolOrderError, match=r"^tool_order lists unregistered tool"):
            order_tools(schemas, known, tool_order)
        return
    result = order_tools(schemas, known, tool_order)
    assert result == _reference_order(schemas, known, tool_order)
    assert sorted(t.description for t in result) == sorted(t.description for t in schemas)


# --- error classes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "code", "builtin"),
    [
        (PromptRenderError, "PROMPT_RENDER", ValueError),
        (ToolOrderError, "TOOL_ORDER", ValueError),
        (PromptRegistrationError, "PROMPT_REGISTRATION", ValueError),
        (SectionOrderError, "PROMPT_SECTION_ORDER", TypeError),
    ],
)
def test_error_classes_have_codes_and_builtin_bases(
    cls: type[DshError], code: str, builtin: type[Exception]
) -> None:
    error = cls("why")
    assert isinstance(error, DshError)
    assert isinstance(error, builtin)
    assert error.code == code
    assert str(error) == "why"
