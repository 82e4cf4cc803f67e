"""Glob patterns as the fs tools read them: ``**`` for any depth, braces, classes.

A pattern matches a whole ``/``-separated path: ``*`` and ``?`` never cross a ``/``,
``**`` as a whole component matches any number of directories (none included),
``[abc]`` / ``[!abc]`` are character classes, ``{a,b}`` alternatives (nestable), and
``\\`` escapes the next character. Dot files are not special.
"""

from __future__ import annotations

import re

__all__ = ["compile_glob", "split_glob"]

_MAGIC = re.compile(r"[*?\[\]{}\\]")


def compile_glob(pattern: str) -> re.Pattern[str]:
    """The regular expression matching exactly the paths ``pattern`` matches (use
    ``fullmatch``). Raises ``ValueError`` for an empty pattern or an unclosed ``[`` or
    ``{``."""
    if not pattern:
        raise ValueError("a glob pattern must not be empty")
    body, end = _translate(pattern, 0, closing=False)
    assert end == len(pattern)
    return re.compile(body, re.DOTALL)


def split_glob(pattern: str) -> tuple[str, str]:
    """``(prefix, rest)``: the leading components of ``pattern`` without any glob
    character, and the pattern that remains (``"src/**/*.py"`` gives ``("src",
    "**/*.py")``). The prefix keeps a leading ``/``; the rest may be empty."""
    parts = pattern.split("/")
    literal = 0
    while literal < len(parts) - 1 and not _MAGIC.search(parts[literal]):
        literal += 1
    prefix = "/".join(parts[:literal])
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    return prefix, "/".join(parts[literal:])


def _translate(pattern: str, i: int, *, closing: bool) -> tuple[str, int]:
    """Translate from ``i`` until the end, or (``closing``) until the ``}`` or ``,``
    that ends the current alternative; returns the regex and where it stopped."""
    out: list[str] = []
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if closing and c in ",}":
            return "".join(out), i
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            whole = (i == 0 or pattern[i - 1] == "/") and (j == n or pattern[j] == "/")
            if j - i >= 2 and whole:
                if j == n:
                    out.append(".*")
                else:
                    out.append("(?:[^/]*/)*")
                    j += 1
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            cls, i = _char_class(pattern, i)
            out.append(cls)
        elif c == "{":
            alternatives: list[str] = []
            i += 1
            while True:
                alt, i = _translate(pattern, i, closing=True)
                alternatives.append(alt)
                if i >= n:
                    raise ValueError(f"unclosed '{{' in glob pattern {pattern!r}")
                i += 1
                if pattern[i - 1] == "}":
                    break
            out.append("(?:" + "|".join(alternatives) + ")")
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out), i


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    """The class starting at ``pattern[i] == "["``; returns it and the index after."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    start = j
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):
        raise ValueError(f"unclosed '[' in glob pattern {pattern!r}")
    members = "".join(ch if ch == "-" else re.escape(ch) for ch in pattern[start:j])
    return (f"[^/{members}]" if negate else f"[{members}]"), j + 1
