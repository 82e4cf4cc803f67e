"""Tests for ``render_prompt``: strict interpolation, dropping and joining of sections."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh._errors import DshError
from dsh_system_prompt._errors import PromptRenderError
from dsh_system_prompt._render import render_prompt
from dsh_system_prompt._types import (
    VARIABLE_NAME,
    AssembleContext,
    AssembledSection,
    PromptAssembly,
    PromptSection,
)
from tests.support import IDENT

GROUP_RULE = "(references are complete simple {{name}} groups)"
NAME_RULE = "(variable names match /^[a-z][a-z0-9_]*$/)"


def assembly(
    *texts: str | tuple[str, str], variables: dict[str, str | None] | None = None
) -> PromptAssembly:
    """Build an assembly; a bare text becomes a section named "s", a pair is (name, text)."""
    sections = []
    for order, item in enumerate(texts):
        name, text = item if isinstance(item, tuple) else ("s", item)
        sections.append(AssembledSection(name=name, order=float(order), text=text))
    return PromptAssembly(sections=sections, tools=[], variables=dict(variables or {}))


def render_error(asm: PromptAssembly) -> str:
    with pytest.raises(PromptRenderError) as info:
        render_prompt(asm)
    return str(info.value)


def malformed_at(excerpt: str, section: str = "s") -> str:
    return (
        f'malformed prompt variable reference at "{excerpt}…" in section "{section}" ' + GROUP_RULE
    )


# --- joining and dropping -------------------------------------------------------------


def test_persona_with_variables_renders_after_identity() -> None:
    # Scenario 15.
    asm = assembly(
        ("harness:identity", IDENT),
        ("deployment:persona", "You run on {{model}} in {{cwd}}."),
        variables={"model": "deepseek-v4", "cwd": "/srv/app"},
    )
    assert render_prompt(asm) == f"{IDENT}\n\nYou run on deepseek-v4 in /srv/app."


def test_sections_join_with_blank_line_in_list_order() -> None:
    assert render_prompt(assembly("one", "two", "three")) == "one\n\ntwo\n\nthree"


def test_no_sections_renders_empty_string() -> None:
    assert render_prompt(assembly()) == ""


def test_empty_sections_are_dropped() -> None:
    # Scenario 24: a literally empty section and one that interpolates to "" both vanish.
    asm = assembly("", "first", "{{blank}}", "{{blank}}{{blank}}", "last", variables={"blank": ""})
    assert render_prompt(asm) == "first\n\nlast"


def test_only_empty_sections_render_empty_string() -> None:
    assert render_prompt(assembly("", "{{v}}", variables={"v": ""})) == ""


def test_whitespace_only_sections_are_kept() -> None:
    asm = assembly("a", " ", "\n", "{{sp}}", "b", variables={"sp": "\t"})
    assert render_prompt(asm) == "a\n\n \n\n\n\n\n\t\n\nb"


def test_text_without_braces_is_returned_verbatim() -> None:
    text = "plain text with } and { and }} but no opener"
    assert render_prompt(assembly(text)) == text


def test_render_does_not_mutate_assembly() -> None:
    asm = assembly("hi {{who}}", variables={"who": "you"})
    assert render_prompt(asm) == "hi you"
    assert asm.sections[0].text == "hi {{who}}"
    assert asm.variables == {"who": "you"}


# --- substitution ----------------------------------------------------------------------


def test_references_at_edges_adjacent_and_repeated() -> None:
    asm = assembly("{{a}}{{b}} mid {{a}}_{{a_1}}", variables={"a": "A", "b": "B", "a_1": "X"})
    assert render_prompt(asm) == "AB mid A_X"


def test_substituted_values_are_not_rescanned() -> None:
    # Scenario 23.
    asm = assembly("v = {{v}}!", variables={"v": "literal {{sneaky}} inside", "sneaky": "no"})
    assert render_prompt(asm) == "v = literal {{sneaky}} inside!"


def test_value_with_broken_braces_is_inserted_verbatim() -> None:
    asm = assembly("[{{v}}]", variables={"v": "{{{ }} {{Bad}} {{"})
    assert render_prompt(asm) == "[{{{ }} {{Bad}} {{]"


def test_variables_may_be_mutated_and_replaced_between_renders() -> None:
    # Scenario 16 (pure part): a variable added after assembly is honoured.
    asm = assembly("extra: {{extra}}")
    asm.variables["extra"] = "yes"
    assert render_prompt(asm) == "extra: yes"
    asm.variables = {"extra": "replaced"}
    assert render_prompt(asm) == "extra: replaced"


def test_registered_attribute_like_name_renders_own_value() -> None:
    # Scenario 22, second half.
    asm = assembly("{{constructor}}", variables={"constructor": "own-value"})
    assert render_prompt(asm) == "own-value"


# --- literal braces --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "shell ${X:-{{fallback} stays",  # scenario 20
        "{{",
        "ends with {{",
        "{{{",
        "{{ open and never closed } }",
        "a {{ b {{ c",
        "}} before {{ is fine",
    ],
)
def test_opener_without_any_later_closer_is_literal(text: str) -> None:
    assert render_prompt(assembly(text)) == text


def test_literal_opener_after_a_substitution() -> None:
    asm = assembly("{{a}} then {{ open {", variables={"a": "A"})
    assert render_prompt(asm) == "A then {{ open {"


def test_closer_before_opener_does_not_count() -> None:
    # The "}}" search starts two characters past the opener.
    asm = assembly("x }} {{m}} y {{", variables={"m": "M"})
    assert render_prompt(asm) == "x }} M y {{"


# --- malformed groups ------------------------------------------------------------------


def test_triple_braces_are_malformed() -> None:
    # Scenario 21, first example.
    asm = assembly("{{{model}}}", variables={"model": "m"})
    assert render_error(asm) == malformed_at("{{{model}}}")


def test_one_text_in_two_sections_names_each_section() -> None:
    # Texts are scanned once and cached; the section named in an error is the one
    # being rendered, even when the excerpt itself reads like a placeholder.
    text = "{{{section}}}"
    first = assembly(("persona", text))
    second = assembly(("rules", text))
    assert render_error(first) == malformed_at("{{{section}}}", "persona")
    assert render_error(second) == malformed_at("{{{section}}}", "rules")
    bad_name = "{{ x }}"
    assert render_error(assembly(("a", bad_name))).endswith('in section "a" ' + NAME_RULE)
    assert render_error(assembly(("b", bad_name))).endswith('in section "b" ' + NAME_RULE)


def test_nested_brace_before_a_valid_reference_is_malformed() -> None:
    # Scenario 21, second example: the excerpt is 16 characters from the opener.
    asm = assembly("x {{a{b}} y {{model}}", variables={"model": "m"})
    assert render_error(asm) == malformed_at("{{a{b}} y {{mode")


def test_literal_opener_followed_by_valid_reference_is_malformed() -> None:
    asm = assembly("a {{ b {{model}}", variables={"model": "m"})
    assert render_error(asm) == malformed_at("{{ b {{model}}")


def test_opener_then_single_brace_then_closer_is_malformed() -> None:
    assert render_error(assembly("{{{}}")) == malformed_at("{{{}}")


def test_malformed_excerpt_is_truncated_to_sixteen_units() -> None:
    text = "pre {{abcdefghijklmnopqrstuvwxyz{}}"
    assert render_error(assembly(text)) == malformed_at("{{abcdefghijklmn")


def test_malformed_excerpt_keeps_a_whole_astral_character_that_fits() -> None:
    # 2 + 12 + 2 code units: the emoji ends exactly at the sixteenth unit.
    text = "{{abcdefghijkl\U0001f600x{}}"
    assert render_error(assembly(text)) == malformed_at("{{abcdefghijkl\U0001f600")


def test_malformed_excerpt_splits_an_astral_character_like_javascript() -> None:
    # 2 + 13 code units, then the emoji straddles the limit: JS keeps its high surrogate.
    text = "{{abcdefghijklm\U0001f600{}}"
    message = render_error(assembly(text))
    assert message == malformed_at("{{abcdefghijklm\ud83d")
    assert "\U0001f600" not in message


def test_malformed_excerpt_counts_astral_characters_as_two_units() -> None:
    text = "{{" + "\U0001f600" * 8 + "{}}"
    # 2 + 7 * 2 = 16 units: seven emoji fit, the eighth would need units 17 and 18.
    assert render_error(assembly(text)) == malformed_at("{{" + "\U0001f600" * 7)


@pytest.mark.parametrize(
    "name",
    [" model ", "", "Model", "1a", "_a", "a-b", "a b", "a\n", "\na", "é", "__class__", "a.b"],
)
def test_group_with_invalid_name_is_malformed(name: str) -> None:
    # Scenario 19: "{{ model }}" and "{{}}" among others; "a\n" guards against `$`.
    text = "say {{" + name + "}} now"
    expected = f'malformed prompt variable reference "{{{{{name}}}}}" in section "s" {NAME_RULE}'
    assert render_error(assembly(text, variables={name: "v", "model": "m"})) == expected


# --- unknown and valueless references ------------------------------------------------


def test_unknown_variable_lists_registered_names() -> None:
    # Scenario 17.
    asm = assembly(("persona", "on {{modle}}"), variables={"model": "m"})
    assert render_error(asm) == (
        'unknown prompt variable "{{modle}}" in section "persona"; registered variables: model'
    )


def test_unknown_variable_without_any_registered() -> None:
    asm = assembly(("persona", "on {{modle}}"))
    assert render_error(asm) == (
        'unknown prompt variable "{{modle}}" in section "persona"; registered variables: (none)'
    )


def test_unknown_variable_lists_names_in_dict_order() -> None:
    asm = assembly("{{x}}", variables={"zeta": "z", "alpha": None, "mid": "m"})
    assert render_error(asm).endswith("; registered variables: zeta, alpha, mid")


@pytest.mark.parametrize("name", ["constructor", "keys", "get", "items", "copy", "values"])
def test_attribute_like_names_are_unknown_unless_registered(name: str) -> None:
    # Scenario 22, first half: only real keys resolve, never dict attributes.
    asm = assembly("{{" + name + "}}", variables={"model": "m"})
    assert render_error(asm) == (
        f'unknown prompt variable "{{{{{name}}}}}" in section "s"; registered variables: model'
    )


def test_variable_without_value_fails() -> None:
    # Scenario 18.
    asm = assembly(("persona", "in {{cwd}}"), variables={"cwd": None})
    assert render_error(asm) == (
        'prompt variable "{{cwd}}" has no value for this assembly (section "persona")'
    )


def test_empty_string_value_is_a_value() -> None:
    assert render_prompt(assembly("[{{cwd}}]", variables={"cwd": ""})) == "[]"


def test_first_problem_in_text_order_wins() -> None:
    asm = assembly("{{gone}} {{bad name}} {{{", variables={})
    assert render_error(asm).startswith('unknown prompt variable "{{gone}}"')
    asm = assembly("{{Bad}} {{gone}}")
    assert render_error(asm).startswith('malformed prompt variable reference "{{Bad}}"')


def test_first_failing_section_wins() -> None:
    asm = assembly(("ok", "fine {{a}}"), ("one", "{{b}}"), ("two", "{{C}}"), variables={"a": "A"})
    assert render_error(asm) == (
        'unknown prompt variable "{{b}}" in section "one"; registered variables: a'
    )


def test_render_error_is_a_value_error_with_stable_code() -> None:
    with pytest.raises(ValueError, match=re.escape('"{{nope}}"')) as info:
        render_prompt(assembly("{{nope}}"))
    assert isinstance(info.value, DshError)
    assert info.value.code == "PROMPT_RENDER"


# --- types used by the renderer --------------------------------------------------------


def test_types_are_mutable_keyword_dataclasses() -> None:
    section = PromptSection(name="rules", order=10, text=lambda ctx: f"for {ctx.agent}")
    assert callable(section.text)
    assert section.text(AssembleContext(agent="alice")) == "for alice"
    section.order = 11.5
    assert section.order == 11.5
    ctx = AssembleContext()
    assert (ctx.scope, ctx.agent) == (None, None)
    asm = assembly("x")
    asm.sections.append(AssembledSection(name="y", order=1.0, text="y"))
    assert render_prompt(asm) == "x\n\ny"


def test_variable_name_pattern_needs_fullmatch() -> None:
    assert VARIABLE_NAME.fullmatch("model_2")
    assert VARIABLE_NAME.fullmatch("model\n") is None
    assert VARIABLE_NAME.fullmatch("2model") is None


# --- properties ------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "{{",
        "}}",
        "{",
        "}",
        "{{model}}",
        "{{x}}",
        "{{}}",
        "{{Bad}}",
        "{{ a }}",
        "a",
        "_",
        " ",
        "\n",
        "\U0001f600",
        "model",
        "constructor",
        "{{constructor}}",
    ]
)
_TEXTS = st.lists(_FRAGMENTS | st.text(max_size=8), max_size=30).map("".join)
_VARIABLES = st.dictionaries(
    st.sampled_from(["model", "x", "a", "constructor", "Bad", ""]) | st.text(max_size=5),
    st.none() | st.text(max_size=8),
    max_size=6,
)


def _reference_interpolate(name: str, text: str, variables: dict[str, str | None]) -> str:
    """A literal transcription of the original scan, without the early exit."""
    result = ""
    last = 0
    start = text.find("{{")
    while start >= 0:
        group = re.match(r"\{\{([^{}]*)\}\}", text[start:])
        if group is None:
            if text.find("}}", start + 2) >= 0:
                # Python's UTF-16 codec keeps a cut surrogate pair's high half here.
                units = text[start:].encode("utf-16-be", "surrogatepass")[:32]
                excerpt = units.decode("utf-16-be", "surrogatepass")
                raise PromptRenderError(malformed_at(excerpt, name))
            result += text[last : start + 2]
            last = start + 2
            start = text.find("{{", last)
            continue
        ref = group.group(0)[2:-2]
        if re.fullmatch(r"[a-z][a-z0-9_]*", ref) is None:
            raise PromptRenderError(
                f'malformed prompt variable reference "{{{{{ref}}}}}" in section "{name}" '
                + NAME_RULE
            )
        if ref not in variables:
            known = ", ".join(variables) or "(none)"
            raise PromptRenderError(
                f'unknown prompt variable "{{{{{ref}}}}}" in section "{name}"; '
                f"registered variables: {known}"
            )
        value = variables[ref]
        if value is None:
            raise PromptRenderError(
                f'prompt variable "{{{{{ref}}}}}" has no value for this assembly (section "{name}")'
            )
        result += text[last:start] + value
        last = start + len(group.group(0))
        start = text.find("{{", last)
    return result + text[last:]


@given(texts=st.lists(_TEXTS, max_size=4), variables=_VARIABLES)
def test_render_is_total_and_matches_reference_scan(
    texts: list[str], variables: dict[str, str | None]
) -> None:
    asm = assembly(*[(f"s{i}", text) for i, text in enumerate(texts)], variables=variables)
    try:
        expected: str | None = "\n\n".join(
            out
            for out in (_reference_interpolate(f"s{i}", t, variables) for i, t in enumerate(texts))
            if out
        )
        expected_error = None
    except PromptRenderError as exc:
        expected, expected_error = None, str(exc)
    if expected_error is None:
        actual = render_prompt(asm)
        assert isinstance(actual, str)
        assert actual == expected
    else:
        assert render_error(asm) == expected_error


_NAMES = st.from_regex(VARIABLE_NAME, fullmatch=True).filter(lambda n: len(n) <= 6)


@given(
    values=st.dictionaries(_NAMES, st.text(), min_size=1, max_size=5),
    data=st.data(),
)
def test_references_to_arbitrary_values_concatenate(
    values: dict[str, str | None], data: st.DataObject
) -> None:
    names = data.draw(st.lists(st.sampled_from(sorted(values)), max_size=10))
    text = "".join("{{" + name + "}}" for name in names)
    expected = "".join(values[name] or "" for name in names)
    assert render_prompt(assembly(text, variables=values)) == expected
