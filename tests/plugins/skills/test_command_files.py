"""Markdown command files: discovery and shadowing, frontmatter, argument expansion,
what is sent."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dsh import Context
from dsh.testing import text
from dsh_skills import Skills, SkillsConfig, command_dirs, expand
from dsh_stdio_agent import EXIT_OK
from tests.plugins.skills.skills_support import isolate
from tests.plugins.stdio_agent.stdio_support import front_rig

pytestmark = pytest.mark.anyio


def write(directory: Path, name: str, content: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.md"
    path.write_text(content)
    return path


@pytest.mark.parametrize(
    ("body", "arguments", "sent"),
    [
        ("Fix issue $ARGUMENTS now.", "#12 in parser", "Fix issue #12 in parser now."),
        ("$ARGUMENTS and $ARGUMENTS", "x", "x and x"),
        ("Review PR $1 by $2 ($3).", "42 alice", "Review PR 42 by alice ()."),
        (
            "First: $1; all: $ARGUMENTS",
            '"two words" three',
            'First: two words; all: "two words" three',
        ),
        ("$9!", "a b c d e f g h i", "i!"),
        ("$10", "a b", "a0"),
        ("Cost: $5", "", "Cost: "),
        ("Echo $ARGUMENTS", "$1 $ARGUMENTS", "Echo $1 $ARGUMENTS"),  # never scanned again
        ("Unbalanced $1", "it's here", "Unbalanced it's"),
        ("No placeholders.", "extra words", "No placeholders.\n\nextra words"),
        ("No placeholders.", "", "No placeholders."),
        ("$ARGUMENT is not one", "x", "$ARGUMENT is not one\n\nx"),
        ("Price $ 1", "x", "Price $ 1\n\nx"),
    ],
)
def test_expand(body: str, arguments: str, sent: str) -> None:
    assert expand(body, arguments) == sent


async def test_discovery_shadowing_and_what_is_sent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, project = isolate(monkeypatch, tmp_path)
    outer = project.parent
    write(
        project / ".dsh" / "commands",
        "fix",
        "---\ndescription: Fix an issue\nargument-hint: ISSUE\n---\nFix issue $ARGUMENTS.\n",
    )
    write(project / ".claude" / "commands", "fix", "claude's fix")
    write(
        project / ".claude" / "commands",
        "review",
        "---\nargument-hint: [pr-number] [priority]\n---\n\n# Review a PR\n\nReview PR $1 ($2).",
    )
    write(outer / ".claude" / "commands", "review", "outer review")
    write(
        outer / ".claude" / "commands",
        "outer-only",
        "---\ndescription: From above\nargument-hint: [target]\n---\nAbove.",
    )
    write(home / ".config" / "dsh" / "commands", "fix", "user fix")
    write(home / ".claude" / "commands", "mine", "")
    write(home / ".claude" / "commands", "bad yaml", "x")
    write(home / ".claude" / "commands", "broken", "---\ndescription: [x\njust words\n---\n")
    write(home / ".claude" / "commands", "unclosed", "---\ndescription: x\n")
    write(home / ".claude" / "commands", "typed", "---\ndescription: 3\n---\n")
    (home / ".claude" / "commands" / "notes.txt").write_text("not a command")
    (home / ".claude" / "commands" / "folder.md").mkdir()
    (home / ".claude" / "commands" / "latin1.md").write_bytes(b"caf\xe9")
    caplog.set_level(logging.WARNING, "dsh.skills")
    replies = [text("fixed"), text("reviewed")]
    async with front_rig(*replies, plugins=((Skills, None),)) as r:
        registry = r.root.slash_commands
        shown = {
            c.name: (c.description, c.argument_hint)
            for c in registry.list()
            if c.name in {"fix", "review", "outer-only", "mine"}
        }
        assert shown == {
            "fix": ("Fix an issue", "ISSUE"),
            "review": ("Review a PR", "[pr-number] [priority]"),
            "outer-only": ("From above", "[target]"),
            "mine": ("the mine command file", ""),
        }
        for name in ("bad yaml", "broken", "unclosed", "typed", "notes", "folder", "latin1"):
            assert registry.get(name) is None
        warnings = "\n".join(rec.getMessage() for rec in caplog.records)
        user = home / ".claude" / "commands"
        assert (
            f"skipped command file {user / 'bad yaml.md'}: 'bad yaml' is not a command name"
            in warnings
        )
        assert (
            f"skipped command file {user / 'broken.md'}: "
            "its frontmatter line 3 is not `name: value`" in warnings
        )
        assert f"{user / 'unclosed.md'}: its frontmatter is not closed" in (warnings)
        assert (
            f"skipped command file {user / 'typed.md'}: `description` must be a string" in warnings
        )
        assert f"skipped command file {user / 'latin1.md'}: it is not UTF-8 text" in warnings
        # The body is read when the command runs: an edit shows at once.
        write(project / ".claude" / "commands", "review", "Now review $1 quickly.")
        r.lines.feed("/fix #7 in the parser", "/review 42 high", "/exit")
        assert await r.front.run() == EXIT_OK
        assert [q.messages[-1].text for q in r.model.requests] == [
            "Fix issue #7 in the parser.",
            "Now review 42 quickly.",
        ]
        # A file gone since: the command says so.
        (project / ".claude" / "commands" / "review.md").unlink()
        replies_seen: list[str] = []

        async def send(message: str) -> None:
            raise AssertionError("nothing to send")

        await registry.dispatch(
            "/review 1", agent=r.agent, reply=replies_seen.append, send=send, frontend="test"
        )
        assert replies_seen[0].startswith(
            f"/review: the command file {project / '.claude/commands/review.md'} cannot be read"
        )
    dirs = command_dirs(str(project), SkillsConfig())
    assert dirs[:2] == [str(project / ".dsh" / "commands"), str(project / ".claude" / "commands")]
    assert dirs[-2:] == [
        str(home / ".config" / "dsh" / "commands"),
        str(home / ".claude" / "commands"),
    ]
    assert command_dirs(str(project), SkillsConfig(user=False))[-1] == "/.claude/commands"


async def test_a_taken_name_is_a_warning_and_commands_false_registers_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, project = isolate(monkeypatch, tmp_path)
    path = write(project / ".dsh" / "commands", "tokens", "My own tokens.")
    write(project / ".dsh" / "commands", "mine", "Mine.")
    caplog.set_level(logging.WARNING, "dsh.skills")
    async with front_rig() as r:
        await r.root.plugin(Skills, None)
        assert r.root.slash_commands.get("mine") is not None
        (warning,) = [rec.getMessage() for rec in caplog.records]
        assert warning.startswith(f'skipped command file {path}: slash command "/tokens" of')
        assert 'already registered by "stdio-agent"' in warning
    async with Context() as root:
        from dsh_agent_core import AgentCore

        await root.plugin(AgentCore, {"model": "m"})
        await root.plugin(Skills, {"commands": False})
        assert root.slash_commands.list() == []
