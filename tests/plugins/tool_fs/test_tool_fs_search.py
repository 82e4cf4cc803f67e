"""``glob`` and ``grep``: exact replies, order, caps, filters and .gitignore."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_tool_fs import GLOB_LIMIT, GREP_LIMIT
from tests.plugins.fs.fs_support import Layout, fs_stack, run

pytestmark = pytest.mark.anyio


def touch(path: Path, text: str = "", mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


async def test_glob_lists_files_newest_first_relative_to_path(ws: Layout) -> None:
    old = touch(ws.root / "src" / "old.py", mtime=1_000)
    new = touch(ws.root / "src" / "pkg" / "new.py", mtime=3_000)
    mid = touch(ws.root / "top.py", mtime=2_000)
    touch(ws.root / "notes.txt")
    touch(ws.root / ".git" / "hook.py")
    (ws.root / "src" / "dir.py").mkdir()
    async with fs_stack() as root:
        everywhere = await run(root, "glob", ws.call(), pattern="**/*.py")
        top_only = await run(root, "glob", ws.call(), pattern="*.py")
        under = await run(root, "glob", ws.call(), pattern="*.py", path="src")
        prefixed = await run(root, "glob", ws.call(), pattern="src/**/*.py")
        absolute = await run(root, "glob", ws.call(), pattern=f"{ws.root}/src/*.py")
        none = await run(root, "glob", ws.call(), pattern="**/*.rs")
    assert everywhere.content == f"{new}\n{mid}\n{old}"
    assert top_only.content == str(mid)
    assert under.content == str(old)
    assert prefixed.content == f"{new}\n{old}"
    assert absolute.content == str(old)
    assert (none.content, none.is_error) == ("No files found", False)


async def test_glob_shows_at_most_the_limit_and_says_how_many_there_are(ws: Layout) -> None:
    for n in range(GLOB_LIMIT + 5):
        touch(ws.root / f"f{n:03}.txt", mtime=10_000 + n)
    async with fs_stack() as root:
        result = await run(root, "glob", ws.call(), pattern="*.txt")
    lines = result.content.split("\n")
    assert lines[0] == f"{ws.root}/f{GLOB_LIMIT + 4:03}.txt"
    assert len(lines) == GLOB_LIMIT + 2
    assert lines[-2:] == [
        "",
        f"(Showing the {GLOB_LIMIT} newest of {GLOB_LIMIT + 5} files. Use a more specific "
        "pattern or path to see the rest.)",
    ]


async def test_glob_errors(ws: Layout) -> None:
    touch(ws.root / "file.txt")
    async with fs_stack() as root:
        bad = await run(root, "glob", ws.call(), pattern="[abc")
        empty = await run(root, "glob", ws.call(), pattern="")
        missing = await run(root, "glob", ws.call(), pattern="*", path="nope")
        not_dir = await run(root, "glob", ws.call(), pattern="*", path="file.txt")
    assert (bad.content, bad.code) == (
        "Error: invalid glob pattern: unclosed '[' in glob pattern '[abc'",
        "INVALID_ARGS",
    )
    assert empty.content == "Error: invalid glob pattern: a glob pattern must not be empty"
    assert (missing.content, missing.code) == (
        f'Error: cannot list "{ws.root}/nope": not found',
        "FS_NOT_FOUND",
    )
    assert (not_dir.content, not_dir.code) == (
        f'Error: cannot list "{ws.root}/file.txt": not a directory',
        "FS_NOT_DIRECTORY",
    )


async def test_grep_counts_matching_lines_and_shows_each(ws: Layout) -> None:
    a = touch(ws.root / "a.py", "def f():\n    return f(f)\n")
    b = touch(ws.root / "sub" / "b.py", "x = 1\nprint(f(1))\n")
    touch(ws.root / "c.txt", "f\n")
    async with fs_stack() as root:
        many = await run(root, "grep", ws.call(), pattern=r"f\(")
        one = await run(root, "grep", ws.call(), pattern=r"^x =")
        none = await run(root, "grep", ws.call(), pattern="nothing here")
        only_py = await run(root, "grep", ws.call(), pattern="f", glob="*.py")
        by_path = await run(root, "grep", ws.call(), pattern="f", glob="sub/*.py")
        a_file = await run(root, "grep", ws.call(), pattern="return", path="a.py")
    assert many.content == (
        f"Found 3 matches\n{a}:1: def f():\n{a}:2:     return f(f)\n{b}:2: print(f(1))"
    )
    assert one.content == f"Found 1 match\n{b}:1: x = 1"
    assert (none.content, none.is_error) == ("No matches found", False)
    assert only_py.content.startswith("Found 3 matches\n")
    assert "c.txt" not in only_py.content
    assert by_path.content == f"Found 1 match\n{b}:2: print(f(1))"
    assert a_file.content == f"Found 1 match\n{a}:2:     return f(f)"


async def test_grep_is_case_sensitive_unless_asked(ws: Layout) -> None:
    a = touch(ws.root / "a.txt", "Hello\nhello\n")
    async with fs_stack() as root:
        exact = await run(root, "grep", ws.call(), pattern="hello")
        folded = await run(root, "grep", ws.call(), pattern="hello", case_insensitive=True)
    assert exact.content == f"Found 1 match\n{a}:2: hello"
    assert folded.content == f"Found 2 matches\n{a}:1: Hello\n{a}:2: hello"


async def test_grep_shows_at_most_the_limit_and_cuts_long_lines(ws: Layout) -> None:
    touch(ws.root / "many.txt", "hit\n" * (GREP_LIMIT + 3))
    wide = touch(ws.root / "wide.txt", "wide " + "w" * 20 + "\n")
    async with fs_stack(tools={"read_max_line_length": 8}) as root:
        many = await run(root, "grep", ws.call(), pattern="hit")
        cut = await run(root, "grep", ws.call(), pattern="wide")
    lines = many.content.split("\n")
    assert lines[0] == f"Found {GREP_LIMIT + 3} matches"
    assert len(lines) == GREP_LIMIT + 3
    assert lines[-1] == (
        f"(Showing the first {GREP_LIMIT} of {GREP_LIMIT + 3} matches. Use a more specific "
        "pattern, path or glob to see the rest.)"
    )
    assert cut.content == f"Found 1 match\n{wide}:1: wide www... (line truncated to 8 chars)"


async def test_grep_errors(ws: Layout) -> None:
    os.mkfifo(ws.root / "pipe")
    async with fs_stack() as root:
        regex = await run(root, "grep", ws.call(), pattern="(")
        glob = await run(root, "grep", ws.call(), pattern="x", glob="{a")
        missing = await run(root, "grep", ws.call(), pattern="x", path="nope")
        fifo = await run(root, "grep", ws.call(), pattern="x", path="pipe")
    assert (regex.content, regex.code) == (
        'Error: invalid regex "(": missing ), unterminated subpattern at position 0',
        "INVALID_ARGS",
    )
    assert (glob.content, glob.code) == (
        "Error: invalid glob: unclosed '{' in glob pattern '{a'",
        "INVALID_ARGS",
    )
    assert (missing.content, missing.code) == (
        f'Error: cannot search "{ws.root}/nope": not found',
        "FS_NOT_FOUND",
    )
    assert (fifo.content, fifo.code) == (
        f'Error: cannot search "{ws.root}/pipe": it is a FIFO',
        "FS_NOT_REGULAR_FILE",
    )


@pytest.mark.parametrize("work_tree", [False, True], ids=["plain-folder", "git-work-tree"])
async def test_grep_honours_gitignore_files(ws: Layout, work_tree: bool) -> None:
    if work_tree:
        (ws.root / ".git").mkdir()
        touch(ws.root / ".git" / "config", "needle\n")
    touch(ws.root / ".gitignore", "*.log\nbuild/\n!keep.log\n")
    kept = touch(ws.root / "keep.log", "needle\n")
    touch(ws.root / "noise.log", "needle\n")
    touch(ws.root / "build" / "out.txt", "needle\n")
    src = touch(ws.root / "src" / "main.py", "needle\n")
    touch(ws.root / "src" / ".gitignore", "generated.py\n")
    touch(ws.root / "src" / "generated.py", "needle\n")
    async with fs_stack() as root:
        whole = await run(root, "grep", ws.call(), pattern="needle")
        # Searching a subfolder: the work tree's top .gitignore still applies there.
        touch(ws.root / "src" / "trace.log", "needle\n")
        sub = await run(root, "grep", ws.call(), pattern="needle", path="src")
    assert whole.content == f"Found 2 matches\n{kept}:1: needle\n{src}:1: needle"
    expected_sub = [f"{src}:1: needle"]
    if not work_tree:  # outside a work tree only the searched folder's files count
        expected_sub.insert(0, f"{ws.root}/src/trace.log:1: needle")
        expected_sub.sort()
    assert sub.content.split("\n")[1:] == expected_sub


async def test_glob_ignores_gitignore_but_not_git(ws: Layout) -> None:
    touch(ws.root / ".gitignore", "*.log\n")
    log = touch(ws.root / "a.log")
    touch(ws.root / ".git" / "b.log")
    async with fs_stack() as root:
        result = await run(root, "glob", ws.call(), pattern="**/*.log")
    assert result.content == str(log)
