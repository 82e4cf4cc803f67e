"""Strict ``{{variable}}`` interpolation of an assembly into the final system prompt.

Two levels of compilation, both made once and kept:

* each distinct section text is scanned once into literal and reference pieces (an LRU
  cache of :func:`_compile`; the scan is linear: ``str.find`` locates each ``{{`` and
  one precompiled pattern is matched right there);
* each distinct tuple of section texts becomes a :class:`_Plan`: the whole prompt as one
  sequence of literal keys and variable names, rendered by one C-level ``itemgetter``
  over the literals and the values and one ``"".join``. A plan remembers its last
  values and output, so rendering unchanged values again returns the same string.

Anything the plan cannot render (a malformed or unknown reference, a valueless or
non-``str`` value, a section that may come out empty) is rendered again section by
section by :func:`_render_sections`, which raises exactly the seed's errors.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ._errors import PromptRenderError
from ._types import VARIABLE_NAME, PromptAssembly

if TYPE_CHECKING:
    from ._cache import View

__all__ = ["clear_cache", "plan_for", "render_prompt"]

# A complete reference group starting exactly at a "{{": no brace may occur inside.
_GROUP = re.compile(r"\{\{([^{}]*)\}\}")

# The variable grammar as the original spells it inside error messages.
_NAME_RULE = "/^[a-z][a-z0-9_]*$/"

# Length, in UTF-16 code units, of the excerpt quoted by the "malformed ... at" error.
_EXCERPT_UNITS = 16

# How many plans (distinct tuples of section texts) are kept.
_PLANS_KEPT = 256


def render_prompt(assembly: PromptAssembly) -> str:
    """Interpolate every section, drop the ones that come out empty, join with a blank line.

    Sections are processed in list order and the first bad reference raises
    :class:`PromptRenderError`. A section that is only whitespace is kept. Values are
    inserted verbatim and never scanned for references themselves.
    """
    variables = assembly.variables
    view: View | None = getattr(assembly, "_dsh_unread", None)
    if view is not None:
        # Built by assemble() and its sections never read: their texts are known.
        texts: tuple[Any, ...] = assembly.__dict__["_dsh_texts"]
        plan = view.plan if texts is view.texts else None
        if plan is None:
            plan = plan_for(texts)
            if texts is view.texts:
                view.plan = plan
        if plan is not None:
            out = plan.render(variables)
            if out is not None:
                return out
        return _render_sections(zip(view.names, texts, strict=True), variables)
    sections = assembly.sections
    try:
        texts = tuple([section.text for section in sections])
        plan = plan_for(texts)
    except TypeError:  # an unhashable text: the section-by-section path reports it
        plan = None
    if plan is not None:
        out = plan.render(variables)
        if out is not None:
            return out
    return _render_sections(((s.name, s.text) for s in sections), variables)


def _render_sections(sections: Iterable[tuple[str, Any]], variables: dict[str, Any]) -> str:
    """The reference renderer: one section after the other, raising the first error."""
    rendered = (_interpolate(name, text, variables) for name, text in sections)
    return "\n\n".join(text for text in rendered if text)


class _Plan:
    """A whole prompt compiled: literal keys and variable names, in order.

    A literal's key is a private ``object()``, so no variable name can collide with it.
    ``render`` copies the literals, adds the string values and reads every key at once;
    it returns None when the values cannot render the plan (an unknown, valueless or
    non-``str`` value), leaving the error to the section-by-section path.
    """

    __slots__ = ("getter", "last_output", "last_values", "literals", "text")

    def __init__(self, keys: list[object], literals: dict[object, str]) -> None:
        #: The whole prompt when it references no variable.
        self.text: str | None = literals[keys[0]] if len(keys) == 1 else None
        self.getter = itemgetter(*keys)
        self.literals = literals
        self.last_values: dict[str, str] | None = None
        self.last_output = ""

    def render(self, variables: Mapping[str, object]) -> str | None:
        if self.text is not None:
            return self.text
        values = {name: value for name, value in variables.items() if type(value) is str}
        if values == self.last_values:
            return self.last_output
        table: dict[object, object] = dict(self.literals)
        table.update(values)
        try:
            parts: tuple[str, ...] = self.getter(table)
        except KeyError:
            return None
        out = "".join(parts)
        self.last_values = values
        self.last_output = out
        return out


#: Plans by their tuple of section texts, least recently used first. A tuple whose
#: texts cannot be planned maps to None, so it is not scanned again either.
_PLANS: OrderedDict[tuple[Any, ...], _Plan | None] = OrderedDict()


def plan_for(texts: tuple[Any, ...]) -> _Plan | None:
    """The plan of these section texts (made once; None when they cannot have one)."""
    try:
        plan = _PLANS[texts]
    except KeyError:
        plan = _PLANS[texts] = _make_plan(texts)
        if len(_PLANS) > _PLANS_KEPT:
            _PLANS.popitem(last=False)
        return plan
    _PLANS.move_to_end(texts)
    return plan


def _make_plan(texts: tuple[Any, ...]) -> _Plan | None:
    keys: list[object] = []
    literals: dict[object, str] = {}
    pending = ""  # the literal text since the last reference
    first = True
    for text in texts:
        if type(text) is not str:
            return None
        parts, names, bad = _compile(text)
        if bad is not None:
            return None  # malformed: the section-by-section path raises it
        if not names:
            if not text:
                continue  # an empty section is dropped
        elif not any(parts):
            return None  # only references: whether it comes out empty depends on values
        if first:
            first = False
        else:
            pending += "\n\n"
        pending += parts[0]
        for i, name in enumerate(names, 1):
            key = object()
            literals[key] = pending
            keys.append(key)
            keys.append(name)
            pending = parts[i]
    key = object()
    literals[key] = pending
    keys.append(key)
    return _Plan(keys, literals)


class _Malformed:
    """Where the scan of a text stops with a malformed reference; the message is
    ``before + <section name> + after``, raised once every reference before it
    resolved."""

    __slots__ = ("after", "before")

    def __init__(self, before: str, after: str) -> None:
        self.before = before
        self.after = after


#: A compiled text: the literals around its references (one more than the names), the
#: names, and where the scan stopped on a malformed reference (None: it did not).
_Compiled = tuple[tuple[str, ...], tuple[str, ...], _Malformed | None]


@functools.lru_cache(maxsize=4096)
def _compile(text: str) -> _Compiled:
    """Split ``text`` into literals and references, once per distinct text.

    The scan is the strict one of :func:`render_prompt`; only the lookups, which
    depend on the assembly's variables, are left for the render.
    """
    start = text.find("{{")
    if start < 0:
        return (text,), (), None
    parts: list[str] = []
    names: list[str] = []
    last = 0
    while start >= 0:
        group = _GROUP.match(text, start)
        if group is None:
            if text.find("}}", start + 2) >= 0:
                parts.append(text[last:start])
                excerpt = _utf16_excerpt(text, start)
                bad = _Malformed(
                    f'malformed prompt variable reference at "{excerpt}…" in section "',
                    '" (references are complete simple {{name}} groups)',
                )
                return tuple(parts), tuple(names), bad
            # No "}}" anywhere past this "{{", so no later "{{" can start a complete
            # group either: everything from `last` on is literal prose.
            break
        name = group.group(1)
        parts.append(text[last:start])
        if VARIABLE_NAME.fullmatch(name) is None:
            bad = _Malformed(
                f'malformed prompt variable reference "{{{{{name}}}}}" in section "',
                f'" (variable names match {_NAME_RULE})',
            )
            return tuple(parts), tuple(names), bad
        names.append(name)
        last = group.end()
        start = text.find("{{", last)
    parts.append(text[last:])
    return tuple(parts), tuple(names), None


def _interpolate(section: str, text: str, variables: dict[str, Any]) -> str:
    """Substitute the references in one section's text (see :func:`render_prompt`)."""
    parts, names, bad = _compile(text)
    if not names and bad is None:
        return text
    out: list[str] = []
    for literal, name in zip(parts, names, strict=False):
        out.append(literal)
        # A plain key test: only names actually present in the dict resolve, so
        # attribute-like names ("__class__", "constructor") are unknown by default.
        if name not in variables:
            registered = ", ".join(variables) or "(none)"
            raise PromptRenderError(
                f'unknown prompt variable "{{{{{name}}}}}" in section "{section}"; '
                f"registered variables: {registered}"
            )
        value = variables[name]
        if value is None:
            raise PromptRenderError(
                f'prompt variable "{{{{{name}}}}}" has no value for this assembly '
                f'(section "{section}")'
            )
        out.append(value)
    if bad is not None:
        raise PromptRenderError(bad.before + section + bad.after)
    out.append(parts[-1])
    return "".join(out)


def clear_cache() -> None:
    """Forget every compiled text and plan (benchmarks measure the cold scan with it)."""
    _compile.cache_clear()
    _PLANS.clear()


def _utf16_excerpt(text: str, start: int) -> str:
    """Return what JavaScript's ``text.slice(start, start + 16)`` would give.

    JavaScript counts UTF-16 code units, so a character outside the BMP takes two of
    the sixteen. When such a character straddles the limit, JavaScript keeps only its
    high surrogate; the lone surrogate is reproduced here as well.
    """
    budget = _EXCERPT_UNITS
    chars: list[str] = []
    # Sixteen code points always cover at least sixteen code units.
    for char in text[start : start + _EXCERPT_UNITS]:
        point = ord(char)
        if point <= 0xFFFF:
            chars.append(char)
            budget -= 1
        elif budget >= 2:
            chars.append(char)
            budget -= 2
        else:
            chars.append(chr(0xD800 | ((point - 0x10000) >> 10)))
            budget -= 1
        if budget == 0:
            break
    return "".join(chars)
