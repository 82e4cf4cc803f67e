"""Glob patterns of the fs seam: ``**``, classes, braces, escapes, literal prefixes."""

from __future__ import annotations

import pytest

from dsh_fs import compile_glob, split_glob


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("*.py", ["a.py", ".hidden.py"], ["d/a.py", "a.pyc"]),
        ("**/*.py", ["a.py", "d/e/a.py"], ["a.txt"]),
        ("src/**", ["src/a", "src/b/c"], ["src", "lib/a"]),
        ("a/**/b", ["a/b", "a/x/y/b"], ["ab", "a/xb"]),
        ("**", ["a", "a/b"], []),
        ("a**b", ["ab", "axxb"], ["a/b"]),
        ("?.txt", ["a.txt"], ["ab.txt", "/.txt"]),
        ("[ab].txt", ["a.txt", "b.txt"], ["c.txt"]),
        ("[!ab].txt", ["c.txt"], ["a.txt", "/.txt"]),
        ("[]x].txt", ["].txt", "x.txt"], ["y.txt"]),
        ("[[^&].txt", ["[.txt", "^.txt", "&.txt"], ["a.txt"]),
        ("[a-c]", ["b"], ["d"]),
        ("*.{ts,tsx}", ["a.ts", "a.tsx"], ["a.js"]),
        ("{a,{b,c}}d", ["ad", "cd"], ["xd"]),
        ("{,x}y", ["y", "xy"], ["zy"]),
        (r"f\*", ["f*"], ["fa"]),
        ("a\\", ["a\\"], ["a"]),
        ("x,y}", ["x,y}"], ["x"]),
    ],
)
def test_what_a_pattern_matches(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    regex = compile_glob(pattern)
    assert [p for p in matching if not regex.fullmatch(p)] == []
    assert [p for p in not_matching if regex.fullmatch(p)] == []


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "a glob pattern must not be empty"),
        ("[ab", "unclosed '[' in glob pattern '[ab'"),
        ("[!", "unclosed '[' in glob pattern '[!'"),
        ("{a,b", "unclosed '{' in glob pattern '{a,b'"),
    ],
)
def test_malformed_patterns_are_value_errors(pattern: str, message: str) -> None:
    with pytest.raises(
        ValueError, match="^" + message.replace("[", r"\[").replace("{", r"\{") + "$"
    ):
        compile_glob(pattern)


@pytest.mark.parametrize(
    ("pattern", "split"),
    [
        ("src/**/*.py", ("src", "**/*.py")),
        ("/abs/dir/*.py", ("/abs/dir", "*.py")),
        ("*.py", ("", "*.py")),
        ("/*.py", ("/", "*.py")),
        ("a/b", ("a", "b")),
        ("a/{b,c}/d", ("a", "{b,c}/d")),
        ("src/", ("src", "")),
    ],
)
def test_the_literal_prefix_of_a_pattern(pattern: str, split: tuple[str, str]) -> None:
    assert split_glob(pattern) == split
