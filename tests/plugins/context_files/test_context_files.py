"""``context-files``: AGENTS.md and CLAUDE.md from the agent's working directory up to
the root become the ``context:project`` section, read again when they change."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from dsh import ConfigError, Context, Fiber
from dsh.testing import ScriptedModel, run_turn, text
from dsh_agent_core import AgentCore
from dsh_context_files import (
    PREAMBLE,
    SECTION,
    VARIABLE,
    ContextFile,
    ContextFiles,
    FileCache,
    folders,
    render,
)
from dsh_system_prompt import SystemPrompt, render_prompt

pytestmark = pytest.mark.anyio


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def block(path: Path, content: str) -> str:
    return f'<file path="{path}">\n{content}\n</file>'


def expected(*files: tuple[Path, str]) -> str:
    """The value of ``{{project_context}}`` for ``files``, in order."""
    return "\n\n".join([PREAMBLE, *(block(path, content) for path, content in files)])


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path``, made the process's current directory (the cwd of an assembly
    without an agent)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@asynccontextmanager
async def prompt_runtime(
    root: Path | None = None, **config: Any
) -> AsyncIterator[tuple[Context, Fiber]]:
    """A root with the system prompt and the plugin (its ``root`` config: ``root``)."""
    async with Context() as ctx:
        await ctx.plugin(SystemPrompt)
        options = dict(config, root=None if root is None else str(root))
        fiber = await ctx.plugin(ContextFiles, options)
        yield ctx, fiber


async def rendered(ctx: Context, agent: Any = None) -> str:
    """The prompt of ``agent`` (the global view without one)."""
    if agent is None:
        assembly = await ctx.system_prompt.assemble()
    else:
        assembly = await ctx.system_prompt.assemble(ctx.agents.assemble_context_for(agent))
    return render_prompt(assembly)


async def value(ctx: Context, agent: Any = None) -> str | None:
    """The ``project_context`` value of an assembly for ``agent`` (global without)."""
    context = None if agent is None else ctx.agents.assemble_context_for(agent)
    found: str | None = (await ctx.system_prompt.assemble(context)).variables[VARIABLE]
    return found


# -- which files, in which order -----------------------------------------------------------


async def test_files_from_the_root_down_to_the_cwd_agents_md_first(tmp_path: Path) -> None:
    top = tmp_path / "top"
    write(tmp_path / "AGENTS.md", "above the root: never read")
    files = [
        (write(top / "AGENTS.md", "top agents"), "top agents"),
        (write(top / "CLAUDE.md", "top claude"), "top claude"),
        (write(top / "a" / "AGENTS.md", "a agents"), "a agents"),
        (write(top / "a" / "b" / "CLAUDE.md", "b claude"), "b claude"),
        (write(top / "a" / "b" / "AGENTS.md", "b agents"), "b agents"),
    ]
    cwd = top / "a" / "b"
    async with prompt_runtime(root=top) as (_, fiber):
        plugin: ContextFiles = fiber.instance
        found = plugin.files(str(cwd))
        assert [f.path for f in found] == [
            str(top / "AGENTS.md"),
            str(top / "CLAUDE.md"),
            str(top / "a" / "AGENTS.md"),
            str(top / "a" / "b" / "AGENTS.md"),
            str(top / "a" / "b" / "CLAUDE.md"),
        ]
        by_path = dict(files)
        assert render(found, 65536) == expected(
            *((Path(f.path), by_path[Path(f.path)]) for f in found)
        )
        # The root itself is included: a cwd at the root reads the root's files only.
        assert [f.path for f in plugin.files(str(top))] == [
            str(top / "AGENTS.md"),
            str(top / "CLAUDE.md"),
        ]


def test_the_folders_of_a_working_directory(tmp_path: Path) -> None:
    deep = tmp_path / "x" / "y"
    deep.mkdir(parents=True)
    chain = folders(str(deep), None)
    assert chain[0] == "/"
    assert chain[-3:] == [str(tmp_path), str(tmp_path / "x"), str(deep)]
    assert folders(str(deep), str(tmp_path / "x")) == [str(tmp_path / "x"), str(deep)]
    assert folders(str(deep), str(deep)) == [str(deep)]
    # A cwd outside the root: the root does not bound it.
    assert folders(str(tmp_path), str(deep)) == folders(str(tmp_path), None)
    # Paths are canonical: a symlinked cwd is its target.
    (tmp_path / "link").symlink_to(deep)
    assert folders(str(tmp_path / "link"), str(tmp_path)) == [
        str(tmp_path),
        str(tmp_path / "x"),
        str(deep),
    ]


async def test_the_section_in_the_prompt_of_an_agent(tmp_path: Path) -> None:
    agents_md = write(tmp_path / "proj" / "AGENTS.md", "Run the tests with `make test`.")
    model = ScriptedModel(text("ok"))
    async with Context() as ctx:
        await ctx.plugin(AgentCore, {"model": "scripted", "persona": "Be brief."})
        await ctx.plugin(ContextFiles, {"root": str(tmp_path)})
        model.install(ctx)
        agent = ctx.agents.create("coder", model="scripted", cwd=str(tmp_path / "proj"))
        assembly = await ctx.system_prompt.assemble(ctx.agents.assemble_context_for(agent))
        names = [(s.name, s.order) for s in assembly.sections]
        assert (SECTION, 50) in names
        assert names.index(("deployment:persona", 0)) < names.index((SECTION, 50))
        assert [s.text for s in assembly.sections if s.name == SECTION] == ["{{project_context}}"]
        assert await run_turn(agent, "hi") == {"kind": "completed"}
        system = model.requests[-1].system
        assert system.endswith(
            "Be brief.\n\n" + expected((agents_md, "Run the tests with `make test`."))
        )


async def test_agents_with_different_cwds_see_their_own_files(tmp_path: Path) -> None:
    shared = write(tmp_path / "AGENTS.md", "shared")
    one = write(tmp_path / "one" / "AGENTS.md", "one")
    two = write(tmp_path / "two" / "CLAUDE.md", "two")
    async with Context() as ctx:
        await ctx.plugin(AgentCore, {"model": "scripted"})
        await ctx.plugin(ContextFiles, {"root": str(tmp_path)})
        first = ctx.agents.create("first", model="scripted", cwd=str(tmp_path / "one"))
        second = ctx.agents.create("second", model="scripted", cwd=str(tmp_path / "two"))
        assert await value(ctx, first) == expected((shared, "shared"), (one, "one"))
        assert await value(ctx, second) == expected((shared, "shared"), (two, "two"))


async def test_without_an_agent_or_its_cwd_the_process_cwd_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = write(tmp_path / "AGENTS.md", "here")
    monkeypatch.chdir(tmp_path)
    async with Context() as ctx:
        await ctx.plugin(AgentCore, {"model": "scripted"})
        await ctx.plugin(ContextFiles, {"root": str(tmp_path)})
        assert await value(ctx) == expected((here, "here"))
        session = ctx.sessions.prepare()  # a session that names no cwd
        agent = ctx.agents.create("nocwd", model="scripted", session=session)
        assert agent.cwd is None
        assert await value(ctx, agent) == expected((here, "here"))


# -- what a file's text becomes ----------------------------------------------------------------


async def test_no_files_render_nothing(in_tmp: Path) -> None:
    tmp_path = in_tmp
    async with Context() as ctx:
        await ctx.plugin(SystemPrompt, {"persona": "Persona."})
        without = await rendered(ctx)
        await ctx.plugin(ContextFiles, {"root": str(tmp_path)})
        assembly = await ctx.system_prompt.assemble()
        assert [s.name for s in assembly.sections][-1] == SECTION
        assert assembly.variables[VARIABLE] == ""
        assert render_prompt(assembly) == without  # the empty section is dropped


async def test_braces_in_a_file_stay_literal(in_tmp: Path) -> None:
    tmp_path = in_tmp
    content = "Write {{model}} and {{ not a var }} and {{ as they are."
    path = write(tmp_path / "AGENTS.md", content)
    async with prompt_runtime(tmp_path) as (ctx, _):
        await ctx.system_prompt.variable("model", lambda context: "m1")
        prompt = await rendered(ctx)
    assert prompt.endswith(expected((path, content)))


async def test_a_byte_order_mark_is_dropped(in_tmp: Path) -> None:
    tmp_path = in_tmp
    path = write(tmp_path / "AGENTS.md", "\ufeffwith a BOM".encode())
    async with prompt_runtime(tmp_path) as (ctx, _):
        assert await value(ctx) == expected((path, "with a BOM"))


async def test_a_file_that_is_not_utf8_is_skipped_with_a_warning(
    in_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tmp_path = in_tmp
    bad = write(tmp_path / "AGENTS.md", b"caf\xe9 latin-1")
    good = write(tmp_path / "CLAUDE.md", "fine")
    async with prompt_runtime(tmp_path) as (ctx, fiber):
        with caplog.at_level(logging.WARNING, "dsh.context-files"):
            assert await value(ctx) == expected((good, "fine"))
            assert await value(ctx) == expected((good, "fine"))
        warnings = [r for r in caplog.records if r.name == "dsh.context-files"]
        problem = "it is not UTF-8 text (invalid continuation byte at byte 3)"
        # Once, not at every assembly.
        assert [r.getMessage() for r in warnings] == [f"skipped context file {bad}: {problem}"]
        assert fiber.instance.cache.reads == 2
        write(bad, "café")  # fixed
        assert await value(ctx) == expected((bad, "café"), (good, "fine"))


async def test_unreadable_and_special_entries_are_skipped(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tmp_path = in_tmp
    (tmp_path / "AGENTS.md").mkdir()  # a folder of that name
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "AGENTS.md").symlink_to(tmp_path / "missing")  # dangling
    locked = write(tmp_path / "sub" / "CLAUDE.md", "secret")
    real_open = os.open

    def refusing(path: Any, flags: int, *args: Any) -> int:
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing)
    async with prompt_runtime(tmp_path) as (ctx, fiber):
        assert await value(ctx) == ""
        with caplog.at_level(logging.WARNING, "dsh.context-files"):
            assert fiber.instance.files(str(tmp_path / "sub")) == []
    assert f"skipped context file {locked}: cannot read it (Permission denied)" in caplog.text


async def test_a_fifo_put_there_after_the_stat_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "AGENTS.md"
    os.mkfifo(fifo)
    regular = write(tmp_path / "regular", "x")
    real_stat = os.stat

    def as_if_regular(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        return real_stat(regular if str(path) == str(fifo) else path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", as_if_regular)
    cache = FileCache(100)
    assert cache.get(str(fifo)) is None  # opened without blocking, then refused
    assert cache.reads == 1


# -- changes -----------------------------------------------------------------------------


async def test_files_are_read_again_when_they_change(in_tmp: Path) -> None:
    tmp_path = in_tmp
    path = write(tmp_path / "AGENTS.md", "one")
    async with prompt_runtime(tmp_path) as (ctx, fiber):
        cache: FileCache = fiber.instance.cache
        assert await value(ctx) == expected((path, "one"))
        for _ in range(3):
            assert await value(ctx) == expected((path, "one"))
        assert cache.reads == 1  # unchanged: served from the cache
        write(path, "two, longer")  # a new size
        assert await value(ctx) == expected((path, "two, longer"))
        stat = path.stat()
        write(path, "TWO, LONGER")  # the same size: the times tell
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        assert await value(ctx) == expected((path, "TWO, LONGER"))
        replacement = write(tmp_path / "new.md", "TWO, LONGER")  # same size and times,
        os.utime(replacement, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
        write(replacement, "renamed in")  # a new file renamed over it: a new inode
        os.replace(replacement, path)
        assert await value(ctx) == expected((path, "renamed in"))
        path.unlink()
        assert await value(ctx) == ""
        claude = write(tmp_path / "CLAUDE.md", "appeared")
        assert await value(ctx) == expected((claude, "appeared"))
        assert cache.reads == 5


# -- the cap -----------------------------------------------------------------------------


async def test_the_text_is_capped_with_a_marker(in_tmp: Path) -> None:
    tmp_path = in_tmp
    first = write(tmp_path / "AGENTS.md", "a" * 30)
    second = write(tmp_path / "CLAUDE.md", "é" * 20)  # 2 bytes each
    third = write(tmp_path / "sub" / "AGENTS.md", "never shown")
    async with prompt_runtime(tmp_path, max_bytes=45) as (ctx, _):
        agent_value = await value(ctx)
        marker = (
            "\n[truncated: the context files are capped at 45 bytes; not shown: the rest of "
            f"{second}]"
        )
        assert agent_value == expected((first, "a" * 30), (second, "é" * 7 + marker))
    async with prompt_runtime(tmp_path, max_bytes=45) as (_, fiber):
        deep = fiber.instance.files(str(tmp_path / "sub"))
        marker = (
            "\n[truncated: the context files are capped at 45 bytes; not shown: the rest of "
            f"{second}, {third}]"
        )
        assert render(deep, 45) == expected((first, "a" * 30), (second, "é" * 7 + marker))


def test_a_file_longer_than_the_cap_is_read_only_up_to_it(tmp_path: Path) -> None:
    path = write(tmp_path / "AGENTS.md", "ab" + "€" * 10)  # 2 + 30 bytes
    cache = FileCache(10)
    file = cache.get(str(path))
    # 10 bytes: "ab" and two whole euro signs; the third is cut mid-character.
    assert file == ContextFile(str(path), "ab€€", 8, truncated=True)
    marker = "\n[truncated: the context files are capped at 10 bytes; not shown: the rest of"
    assert render([file], 10) == expected((path, f"ab€€{marker} {path}]"))
    # A file that fits exactly is whole; the next one is cut to nothing.
    exact = ContextFile("/x", "0123456789", 10, truncated=False)
    after = ContextFile("/y", "more", 4, truncated=False)
    cut = "\n[truncated: the context files are capped at 10 bytes; not shown: the rest of /y]"
    assert render([exact, after], 10) == "\n\n".join(
        [PREAMBLE, block(Path("/x"), "0123456789"), block(Path("/y"), cut)]
    )
    assert render([], 10) == ""


# -- config and disposal -------------------------------------------------------------------


async def test_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "proj").mkdir()
    async with Context() as ctx:
        await ctx.plugin(SystemPrompt)
        relative = await ctx.plugin(ContextFiles, {"root": "proj"})
        assert relative.instance.config.root == str(tmp_path / "proj")
        await relative.dispose()
        home = await ctx.plugin(ContextFiles, {"root": "~/proj"})
        assert home.instance.config.root == str(tmp_path / "proj")
        await home.dispose()
        default = await ctx.plugin(ContextFiles)
        assert (default.instance.config.root, default.instance.config.max_bytes) == (None, 65536)
        await default.dispose()
        explicit = await ctx.plugin(ContextFiles, {"root": None})
        assert explicit.instance.config.root is None
        await explicit.dispose()
        bad: list[tuple[dict[str, Any], str]] = [
            ({"root": "missing"}, "root 'missing' is not a folder"),
            ({"max_bytes": 0}, "max_bytes"),
            ({"names": []}, "names"),
        ]
        for config, problem in bad:
            with pytest.raises(ConfigError, match=problem):
                await ctx.plugin(ContextFiles, config)


async def test_disposal_removes_the_section_and_the_variable(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "x")
    async with Context() as ctx:
        await ctx.plugin(SystemPrompt)
        before = await ctx.system_prompt.assemble()
        fiber = await ctx.plugin(ContextFiles, {"root": str(tmp_path)})
        during = await ctx.system_prompt.assemble()
        assert SECTION in [s.name for s in during.sections]
        await fiber.dispose()
        after = await ctx.system_prompt.assemble()
        assert after == before
        assert SECTION not in [s.name for s in after.sections]
        assert VARIABLE not in after.variables
