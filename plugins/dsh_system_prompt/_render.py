"""Strict ``{{variable}}`` interpolation of an assembly into the final system prompt.

The scan is linear: ``str.find`` locates each ``{{`` and one precompiled pattern is
matched right there, so no Python loop ever walks the text character by character.
Each distinct text is scanned once (an LRU cache of its literals and references);
rendering then only looks the references up.
"""

from __future__ import annotations

import functools
import re

from ._errors import PromptRenderError
from ._types import VARIABLE_NAME, PromptAssembly

__all__ = ["render_prompt"]

# A complete reference group starting exactly at a "{{": no brace may occur inside.
_GROUP = re.compile(r"\{\{([^{}]*)\}\}")

# The variable grammar as the original spells it inside error messages.
_NAME_RULE = "/^[a-z][a-z0-9_]*$/"

# Length, in UTF-16 code units, of the excerpt quoted by the "malformed ... at" error.
_EXCERPT_UNITS = 16


def render_prompt(assembly: PromptAssembly) -> str:
    """Interpolate every section, drop the ones that come out empty, join with a blank line.

    Sections are processed in list order and the first bad reference raises
    :class:`PromptRenderError`. A section that is only whitespace is kept. Values are
    inserted verbatim and never scanned for references themselves.
    """
    variables = assembly.variables
    rendered = (
        _interpolate(section.name, section.text, variables) for section in assembly.sections
    )
    return "\n\n".join(text for text in rendered if text)


class _Ref:
    """A well-formed ``{{name}}`` reference in a compiled text."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Malformed:
    """Where the scan of a text stops with a malformed reference; the message is
    ``before + <section name> + after``, raised once every reference before it
    resolved."""

    __slots__ = ("after", "before")

    def __init__(self, before: str, after: str) -> None:
        self.before = before
        self.after = after


_Piece = str | _Ref | _Malformed


@functools.lru_cache(maxsize=4096)
def _compile(text: str) -> tuple[_Piece, ...]:
    """Split ``text`` into literals and references, once per distinct text.

    The scan is the strict one of :func:`render_prompt`; only the lookups, which
    depend on the assembly's variables, are left for :func:`_interpolate`.
    """
    start = text.find("{{")
    if start < 0:
        return (text,)
    pieces: list[_Piece] = []
    last = 0
    while start >= 0:
        group = _GROUP.match(text, start)
        if group is None:
            if text.find("}}", start + 2) >= 0:
                pieces.append(text[last:start])
                excerpt = _utf16_excerpt(text, start)
                pieces.append(
                    _Malformed(
                        f'malformed prompt variable reference at "{excerpt}…" in section "',
                        '" (references are complete simple {{name}} groups)',
                    )
                )
                return tuple(pieces)
            # No "}}" anywhere past this "{{", so no later "{{" can start a complete
            # group either: everything from `last` on is literal prose.
            break
        name = group.group(1)
        pieces.append(text[last:start])
        if VARIABLE_NAME.fullmatch(name) is None:
            pieces.append(
                _Malformed(
                    f'malformed prompt variable reference "{{{{{name}}}}}" in section "',
                    f'" (variable names match {_NAME_RULE})',
                )
            )
            return tuple(pieces)
        pieces.append(_Ref(name))
        last = group.end()
        start = text.find("{{", last)
    pieces.append(text[last:])
    return tuple(pieces)


def _interpolate(section: str, text: str, variables: dict[str, str | None]) -> str:
    """Substitute the references in one section's text (see :func:`render_prompt`)."""
    pieces = _compile(text)
    if len(pieces) == 1:
        return text
    out: list[str] = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
            continue
        if isinstance(piece, _Malformed):
            raise PromptRenderError(piece.before + section + piece.after)
        name = piece.name
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
    return "".join(out)


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
