"""Agent Skills: discovery order and shadowing, the agentskills.io checks, the
section, the ``skill`` tool, edits mid-session, disposal."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from dsh import Context
from dsh_agent import assemble_context_for
from dsh_agent_core import AgentCore
from dsh_skills import (
    SECTION,
    FrontmatterError,
    Skills,
    SkillsConfig,
    check_skill,
    skill_dirs,
    split_frontmatter,
)
from dsh_system_prompt import AssembleContext, PromptSection, render_prompt
from dsh_tools import ToolCall
from tests.plugins.skills.skills_support import isolate, write_skill

pytestmark = pytest.mark.anyio

INTRO = (
    "Skills are folders of instructions, scripts and files for particular tasks. When a "
    "task matches a skill's description, call `skill` with its name and follow what it "
    "returns before you start. Available skills:"
)


async def section_text(root: Context, agent: Any = None) -> str | None:
    context = AssembleContext() if agent is None else assemble_context_for(agent)
    assembly = await root.system_prompt.assemble(context)
    assert [s.order for s in assembly.sections if s.name == SECTION] == [60]
    text: str = render_prompt(assembly)
    listing = assembly.variables["skills"]
    assert (listing in text) or not listing
    return listing or None


async def test_discovery_order_and_shadowing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home, project = isolate(monkeypatch, tmp_path)
    outer = project.parent
    extra = tmp_path / "extra"
    write_skill(project / ".dsh" / "skills", "review", "project dsh review")
    write_skill(project / ".claude" / "skills", "review", "project claude review")
    write_skill(project / ".claude" / "skills", "lint", "project lint")
    write_skill(outer / ".dsh" / "skills", "lint", "outer lint")
    write_skill(outer / ".claude" / "skills", "deploy", "outer deploy")
    write_skill(home / ".config" / "dsh" / "skills", "deploy", "user deploy")
    write_skill(home / ".config" / "dsh" / "skills", "notes", "user dsh notes")
    write_skill(home / ".claude" / "skills", "notes", "user claude notes")
    write_skill(home / ".claude" / "skills", "pdf", "user pdf")
    write_skill(extra, "pdf", "extra pdf")
    write_skill(extra, "only-extra", "extra only")
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        await root.plugin(Skills, {"paths": [str(extra)], "recheck_seconds": 0})
        assert await section_text(root) == "\n".join(
            [
                INTRO,
                "- review: project dsh review",
                "- lint: project lint",
                "- deploy: outer deploy",
                "- notes: user dsh notes",
                "- pdf: user pdf",
                "- only-extra: extra only",
            ]
        )
        # An agent in another folder sees that folder's project skills.
        elsewhere = tmp_path / "elsewhere"
        write_skill(elsewhere / ".claude" / "skills", "review", "elsewhere review")
        agent = root.agents.create("other", model="m", cwd=str(elsewhere))
        text = await section_text(root, agent)
        assert text is not None
        assert "- review: elsewhere review" in text
        assert "lint" not in text
        # The order of the directories, as the README gives it.
        dirs = skill_dirs(str(project), SkillsConfig(paths=["~/x"]))
        assert dirs[:4] == [
            str(project / ".dsh" / "skills"),
            str(project / ".claude" / "skills"),
            str(outer / ".dsh" / "skills"),
            str(outer / ".claude" / "skills"),
        ]
        assert dirs[-3:] == [
            str(home / ".config" / "dsh" / "skills"),
            str(home / ".claude" / "skills"),
            str(home / "x"),
        ]


async def test_user_false_and_xdg_config_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home, project = isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    write_skill(tmp_path / "xdg" / "dsh" / "skills", "mine", "from xdg")
    assert str(tmp_path / "xdg" / "dsh" / "skills") in skill_dirs(str(project), SkillsConfig())
    assert all(str(home) not in d for d in skill_dirs(str(project), SkillsConfig(user=False)))
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        await root.plugin(Skills, {"user": False})
        assert await section_text(root) is None  # no skills: the section renders empty
        assert "Skills are folders" not in render_prompt(await root.system_prompt.assemble())


BAD = [
    ("no-frontmatter", "Just text.\n", "it has no YAML frontmatter"),
    ("unclosed", "---\nname: unclosed\n", "not closed"),
    ("not-yaml", "---\nname: [x\n---\n", "not valid YAML (line 3)"),
    ("a-list", "---\n- name\n---\n", "not a mapping"),
    ("no-name", "---\ndescription: d\n---\n", "`name` must be a non-empty string"),
    ("Upper", "---\nname: Upper\ndescription: d\n---\n", "1-64 lowercase"),
    ("double--dash", "---\nname: double--dash\ndescription: d\n---\n", "1-64 lowercase"),
    ("-lead", "---\nname: -lead\ndescription: d\n---\n", "1-64 lowercase"),
    ("x" * 65, "---\nname: " + "x" * 65 + "\ndescription: d\n---\n", "1-64 lowercase"),
    ("other-folder", "---\nname: elsewhere\ndescription: d\n---\n", "not the name of its folder"),
    ("no-description", "---\nname: no-description\n---\n", "`description` must be"),
    (
        "blank-description",
        "---\nname: blank-description\ndescription: '  '\n---\n",
        "`description` must be",
    ),
    (
        "long-description",
        "---\nname: long-description\ndescription: " + "d" * 1025 + "\n---\n",
        "1025 characters long (at most 1024)",
    ),
    (
        "long-compat",
        "---\nname: long-compat\ndescription: d\ncompatibility: " + "c" * 501 + "\n---\n",
        "`compatibility` is 501",
    ),
    (
        "bad-license",
        "---\nname: bad-license\ndescription: d\nlicense: 3\n---\n",
        "`license` must be",
    ),
    (
        "bad-metadata",
        "---\nname: bad-metadata\ndescription: d\nmetadata: {a: 1}\n---\n",
        "`metadata` must map",
    ),
]


async def test_invalid_skills_are_skipped_with_a_warning_naming_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, project = isolate(monkeypatch, tmp_path)
    skills = project / ".dsh" / "skills"
    for folder, text, _ in BAD:
        (skills / folder).mkdir(parents=True)
        (skills / folder / "SKILL.md").write_text(text)
    (skills / "binary").mkdir()
    (skills / "binary" / "SKILL.md").write_bytes(b"---\xff\xfe\n")
    (skills / "a-file").write_text("not a folder")
    (skills / "dir-skill" / "SKILL.md").mkdir(parents=True)  # SKILL.md is a folder
    write_skill(
        skills, "good", "fine", license="MIT", compatibility="any", **{"allowed-tools": "read"}
    )
    caplog.set_level(logging.WARNING, "dsh.skills")
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        await root.plugin(Skills, {"recheck_seconds": 0})
        assert await section_text(root) == f"{INTRO}\n- good: fine"
        warnings = [r.getMessage() for r in caplog.records]
        for folder, _, reason in BAD:
            path = skills / folder / "SKILL.md"
            (line,) = [w for w in warnings if str(path) in w]
            assert line.startswith(f"skipped skill {path}: ")
            assert reason in line
        assert f"skipped skill {skills / 'binary' / 'SKILL.md'}: it is not UTF-8 text" in warnings
        assert len(warnings) == len(BAD) + 1
        # Unchanged: not read (nor warned about) again.
        await section_text(root)
        assert len(caplog.records) == len(BAD) + 1


def test_check_skill_keeps_every_field_and_the_body(tmp_path: Path) -> None:
    path = str(tmp_path / "pdf" / "SKILL.md")
    skill = check_skill(path, "---\nname: pdf\ndescription: Read PDFs.\nmodel: x\n---\n\nBody.\n")
    assert (skill.name, skill.description, skill.body) == ("pdf", "Read PDFs.", "Body.")
    assert skill.folder == str(tmp_path / "pdf")
    assert skill.fields == {"name": "pdf", "description": "Read PDFs.", "model": "x"}
    with pytest.raises(FrontmatterError) as caught:
        check_skill(path, "no")
    assert caught.value.code == "SKILL_INVALID"


async def test_a_skill_edited_mid_session(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _, project = isolate(monkeypatch, tmp_path)
    skills = project / ".claude" / "skills"
    path = write_skill(skills, "review", "Review code.", "Check the tests first.")
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        await root.plugin(Skills, {"recheck_seconds": 0})
        agent = root.agents.list()[0]
        call = ToolCall(id="c1", agent=agent)
        assert await section_text(root, agent) == f"{INTRO}\n- review: Review code."
        first = await root.tools.execute("skill", {"name": "review"}, call)
        assert first.content == (
            f'<skill name="review" folder="{path.parent}">\n'
            f"Paths in these instructions are relative to {path.parent}.\n\n"
            "Check the tests first.\n</skill>"
        )
        write_skill(skills, "review", "Review code,\n  carefully.", "Check the docs too.")
        write_skill(skills, "added", "Added later.")
        assert await section_text(root, agent) == (
            f"{INTRO}\n- added: Added later.\n- review: Review code, carefully."
        )
        second = await root.tools.execute("skill", {"name": "review"}, call)
        assert "Check the docs too." in second.content
        path.write_text("broken")
        assert await section_text(root, agent) == f"{INTRO}\n- added: Added later."
        missing = await root.tools.execute("skill", {"name": "review"}, call)
        assert missing.is_error
        assert missing.code == "SKILL_NOT_FOUND"
        assert missing.content == 'Error: no skill is called "review"; the skills: added'


async def test_the_list_is_kept_for_recheck_seconds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, project = isolate(monkeypatch, tmp_path)
    skills = project / ".dsh" / "skills"
    write_skill(skills, "one", "One.")
    clock = [100.0]
    monkeypatch.setattr("dsh_skills._plugin.time.monotonic", lambda: clock[0])
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        await root.plugin(Skills, {"recheck_seconds": 5})
        assert await section_text(root) == f"{INTRO}\n- one: One."
        write_skill(skills, "two", "Two.")
        clock[0] += 4.9
        assert await section_text(root) == f"{INTRO}\n- one: One."
        # The tool always looks again: the model reads what is there.
        result = await root.tools.execute("skill", {"name": "two"}, ToolCall(id="x"))
        assert "Do it." in result.content
        clock[0] += 0.2
        assert await section_text(root) == f"{INTRO}\n- one: One.\n- two: Two."


async def test_disposal_leaves_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _, project = isolate(monkeypatch, tmp_path)
    (project / ".dsh" / "commands").mkdir(parents=True)
    (project / ".dsh" / "commands" / "fix.md").write_text("Fix it.")
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})

        async def state() -> tuple[Any, ...]:
            assembly = await root.system_prompt.assemble()
            return (
                [s.name for s in assembly.sections],
                [t.name for t in assembly.tools],
                sorted(assembly.variables),
                [c.name for c in root.slash_commands.list()],
            )

        before = await state()
        fiber = await root.plugin(Skills)
        during = await state()
        assert "skills" in during[0]
        assert "skill" in during[1]
        assert "fix" in during[3]
        await fiber.dispose()
        assert await state() == before


def test_frontmatter_shapes() -> None:
    assert split_frontmatter("---\n---\nbody", required=True) == ({}, "body")
    assert split_frontmatter("\ufeff---\r\na: 1\r\n---\r\nb", required=True) == ({"a": 1}, "b")
    assert split_frontmatter("plain", required=False) == ({}, "plain")
    lenient = "---\n# a comment\n\nhint: [a] [b]\nquoted: 'x y'\nq2: \"\"\n---\nbody"
    assert split_frontmatter(lenient, required=False, lenient=True) == (
        {"hint": "[a] [b]", "quoted": "x y", "q2": ""},
        "body",
    )
    with pytest.raises(FrontmatterError, match=r"not valid YAML \(line 4\)"):
        split_frontmatter(lenient, required=False)


async def test_skills_of_a_folder_and_a_path_that_is_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, project = isolate(monkeypatch, tmp_path)
    (project / ".dsh").mkdir()
    (project / ".dsh" / "skills").write_text("a file, not a folder")
    write_skill(tmp_path / "there" / ".claude" / "skills", "there", "There.")
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        fiber = await root.plugin(Skills, {"recheck_seconds": 0})
        plugin: Skills = fiber.instance
        assert plugin.skills() == {}
        assert list(plugin.skills(str(tmp_path / "there"))) == ["there"]
        result = await root.tools.execute("skill", {"name": "there"}, ToolCall(id="1"))
        assert result.code == "SKILL_NOT_FOUND"
        assert result.content.endswith("the skills: (none)")


async def test_an_unchanged_list_renders_from_the_prompt_plan(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The section's text is the list itself (a literal), so the prompt's render plan
    # keeps the whole prompt: an unchanged list renders to the very same string.
    _, project = isolate(monkeypatch, tmp_path)
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        root.system_prompt.section(PromptSection(name="other", order=1, text="Be brief."))
        fiber = await root.plugin(Skills, {"user": False, "recheck_seconds": 0})
        empty = [render_prompt(await root.system_prompt.assemble()) for _ in range(2)]
        assert empty[0] is empty[1]
        assert INTRO not in empty[0]
        write_skill(project / ".dsh" / "skills", "one", "One.")
        listed = [render_prompt(await root.system_prompt.assemble()) for _ in range(2)]
        assert listed[0] is listed[1]
        assert listed[0].endswith(f"Be brief.\n\n{INTRO}\n- one: One.")
        # Asked for outside an assembly (no value resolved for it): the same text.
        plugin: Skills = fiber.instance
        assert plugin._section(AssembleContext()) == f"{INTRO}\n- one: One."


async def test_braces_in_a_description_stay_literal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, project = isolate(monkeypatch, tmp_path)
    write_skill(project / ".dsh" / "skills", "tmpl", "Fills {{name}} and {{ x }} in.")
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "m"})
        await root.plugin(Skills, {"user": False})
        text = render_prompt(await root.system_prompt.assemble())
        assert text.endswith(f"{INTRO}\n- tmpl: Fills {{{{name}}}} and {{{{ x }}}} in.")
