"""Permission rules against a table of commands, paths, URLs and tool names."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_permissions import (
    PermissionRuleError,
    RuleSet,
    call_path,
    claude_tool_input,
    claude_tool_name,
    has_substitution,
    parse_rule,
    split_command,
)
from dsh_tools import ToolCall


@dataclass
class FakeAgent:
    cwd: str | None


PROJECT = "/srv/proj"
HOME = "/home/me"


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", HOME)


def call(name: str, cwd: str | None = PROJECT, **arguments: Any) -> ToolCall:
    return ToolCall("c1", agent=FakeAgent(cwd), name=name, arguments=arguments)


def bash(command: str) -> ToolCall:
    return call("bash", command=command)


def decide(
    call: ToolCall,
    allow: tuple[str, ...] = (),
    ask: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
) -> str | None:
    def rules(texts: tuple[str, ...]) -> tuple[Any, ...]:
        return tuple(parse_rule(text, "test", PROJECT) for text in texts)

    decided = RuleSet(rules(deny), rules(ask), rules(allow)).decide(call)
    return None if decided is None else f"{decided[0]} {decided[1].text}"


# -- Bash -------------------------------------------------------------------------------------

BASH_TABLE = [
    # rule, command, allowed?
    ("Bash", "rm -rf /", True),
    ("Bash(git status)", "git status", True),
    ("Bash(git status)", "git status --short", False),
    ("Bash(git status)", "  git status  ", True),
    ("Bash(npm run test:*)", "npm run test", True),
    ("Bash(npm run test:*)", "npm run test -- --watch", True),
    ("Bash(npm run test:*)", "npm run test:unit", True),
    ("Bash(npm run test:*)", "npm run tests", False),
    ("Bash(npm run test:*)", "npm run build", False),
    ("Bash(git:*)", "git", True),
    ("Bash(git:*)", "gitk", False),
    ("Bash(curl http://site.com/:*)", "curl http://site.com/x", True),
    ("Bash(ls *)", "ls", True),
    ("Bash(ls *)", "ls -la", True),
    ("Bash(ls *)", "lsof", False),
    ("Bash(git * main)", "git push origin main", True),
    ("Bash(git * main)", "git push origin dev", False),
    ("Bash(*)", "anything at all", True),
    ("Bash(make:*)", "make && make install", True),
    ("Bash(make:*)", "make && rm -rf build", False),
    ("Bash(make:*)", "make; rm -rf build", False),
    ("Bash(make:*)", "make | tee log", False),
    ("Bash(make:*)", "make || echo failed", False),
    ("Bash(make:*)", "make & rm x", False),
    ("Bash(make:*)", "make\nrm x", False),
    ("Bash(make:*)", "make 2>&1", True),
    ("Bash(make:*)", "make &> log", True),
    ("Bash(make:*)", "make >& log", True),
    ("Bash(echo:*)", "echo 'a && b'", True),
    ("Bash(echo:*)", 'echo "a; b"', True),
    ("Bash(echo:*)", 'echo "say \\"hi\\"; now"', True),
    ("Bash(echo:*)", "echo a \\; b", True),
    ("Bash(echo:*)", "echo $(rm -rf /)", False),
    ("Bash(echo:*)", "echo `rm -rf /`", False),
    ("Bash(echo:*)", "echo '$(not run)'", True),
    ("Bash(cat:*)", "cat <(ls)", False),
]


@pytest.mark.parametrize(("rule", "command", "allowed"), BASH_TABLE)
def test_bash_allow_rules(rule: str, command: str, allowed: bool) -> None:
    assert decide(bash(command), allow=(rule,)) == (f"allow {rule}" if allowed else None)


def test_each_part_of_a_command_line_may_be_allowed_by_another_rule() -> None:
    rules = ("Bash(make:*)", "Bash(npm test)")
    assert decide(bash("make && npm test"), allow=rules) == "allow Bash(make:*)"
    assert decide(bash("make && npm test && rm x"), allow=rules) is None


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("rm -rf build", "deny Bash(rm:*)"),
        ("make && rm -rf build", "deny Bash(rm:*)"),
        ("git push --force", "ask Bash(git push:*)"),
        ("git status", "allow Bash(git:*)"),
        ("rm x && git push", "deny Bash(rm:*)"),
        ("ls", None),
    ],
)
def test_deny_wins_then_ask_then_allow(command: str, expected: str | None) -> None:
    assert (
        decide(
            bash(command), allow=("Bash(git:*)",), ask=("Bash(git push:*)",), deny=("Bash(rm:*)",)
        )
        == expected
    )


def test_a_bare_deny_covers_even_a_call_without_a_command() -> None:
    assert decide(bash("ls"), deny=("Bash",)) == "deny Bash"
    assert decide(bash(""), deny=("Bash",)) == "deny Bash"
    assert decide(call("bash"), deny=("Bash",)) == "deny Bash"
    assert decide(call("bash"), allow=("Bash(ls)",)) is None
    assert decide(call("bash", command=3), allow=("Bash",)) == "allow Bash"


def test_a_deny_inside_a_substitution_part_still_denies() -> None:
    assert decide(bash("rm $(ls)"), deny=("Bash(rm:*)",)) == "deny Bash(rm:*)"


# -- paths ------------------------------------------------------------------------------------

PATH_TABLE = [
    # rule, tool, path given, cwd, matches?
    ("Read(./src/**)", "read", "src/a.py", PROJECT, True),
    ("Read(./src/**)", "read", "/srv/proj/src/deep/b.py", PROJECT, True),
    ("Read(./src/**)", "read", "lib/a.py", PROJECT, False),
    ("Read(./src/**)", "read", "../other/src/a.py", PROJECT, False),
    ("Read(src/**)", "read", "src/a.py", PROJECT, True),
    ("Read(*.env)", "read", "deep/down/prod.env", PROJECT, True),
    ("Read(.env)", "read", "sub/.env", PROJECT, True),
    ("Read(./.env)", "read", "sub/.env", PROJECT, False),
    ("Read(/docs/**)", "read", "/srv/proj/docs/x.md", "/srv/proj/sub", True),
    ("Read(/docs/**)", "read", "/srv/proj/sub/docs/x.md", "/srv/proj/sub", False),
    ("Read(//etc/passwd)", "read", "/etc/passwd", PROJECT, True),
    ("Read(//etc/**)", "read", "/etc/ssh/sshd_config", PROJECT, True),
    ("Read(//etc/**)", "read", "/srv/etc/x", PROJECT, False),
    ("Edit(~/notes/*.md)", "edit", "~/notes/today.md", PROJECT, True),
    ("Edit(~/notes/*.md)", "edit", "/home/me/notes/today.md", PROJECT, True),
    ("Edit(~/notes/*.md)", "edit", "/home/me/notes/sub/today.md", PROJECT, False),
    ("Edit(~/notes/*.md)", "write", "/home/me/notes/new.md", PROJECT, True),
    ("Write(~/notes/*.md)", "edit", "/home/me/notes/new.md", PROJECT, False),
    ("Read(./src/**)", "grep", "src/pkg", PROJECT, True),
    ("Read(/src/**)", "glob", None, "/srv/proj/src/pkg", True),
    ("Read(./src/**)", "edit", "src/a.py", PROJECT, False),
    ("Glob(./src/**)", "glob", "src/x", PROJECT, True),
    ("Grep(./src/**)", "grep", "src/x", PROJECT, True),
    ("Read(./src/**)", "bash", None, PROJECT, False),
]


@pytest.mark.parametrize(("rule", "tool", "path", "cwd", "matches"), PATH_TABLE)
def test_path_rules(rule: str, tool: str, path: str | None, cwd: str, matches: bool) -> None:
    key = "file_path" if tool in ("read", "write", "edit") else "path"
    arguments = {} if path is None else {key: path}
    assert decide(call(tool, cwd=cwd, **arguments), deny=(rule,)) == (
        f"deny {rule}" if matches else None
    )


def test_a_pattern_never_matches_its_own_base_directory() -> None:
    assert decide(call("glob", cwd=PROJECT), deny=("Read(*)",)) is None


def test_a_project_relative_pattern_without_a_project_is_the_cwds() -> None:
    rule = parse_rule("Read(/docs/**)", "test")
    assert RuleSet(deny=(rule,)).decide(call("read", file_path="docs/a.md")) is not None


def test_a_file_tool_without_its_path_matches_no_path_rule() -> None:
    assert decide(call("read"), deny=("Read(**)",)) is None
    assert decide(call("read", file_path=""), deny=("Read(**)",)) is None


def test_paths_resolve_against_the_process_cwd_without_an_agent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert call_path(call("read", cwd=None, file_path="a.txt")) == str(tmp_path / "a.txt")
    no_agent = ToolCall("c", name="read", arguments={"file_path": "a.txt"})
    assert call_path(no_agent) == str(tmp_path / "a.txt")


# -- web, MCP, bare names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "url", "matches"),
    [
        ("WebFetch(domain:example.com)", "https://example.com/page", True),
        ("WebFetch(domain:example.com)", "https://EXAMPLE.com/page", True),
        ("WebFetch(domain:example.com)", "https://docs.example.com/page", False),
        ("WebFetch(domain:*.example.com)", "https://docs.example.com/page", True),
        ("WebFetch(domain:example.com)", "https://example.org/", False),
        ("WebFetch(domain:example.com)", "not a url", False),
        ("WebFetch(domain:example.com)", 42, False),
        ("WebFetch", "https://anything/", True),
    ],
)
def test_web_fetch_rules(rule: str, url: object, matches: bool) -> None:
    assert decide(call("web_fetch", url=url), allow=(rule,)) == (
        f"allow {rule}" if matches else None
    )


@pytest.mark.parametrize(
    ("rule", "tool", "matches"),
    [
        ("mcp__github", "mcp__github__create_issue", True),
        ("mcp__github__*", "mcp__github__create_issue", True),
        ("mcp__github__create_issue", "mcp__github__create_issue", True),
        ("mcp__github__create_issue", "mcp__github__close_issue", False),
        ("mcp__github", "mcp__githubber__x", False),
        ("mcp__github(x)", "mcp__github__x", False),
        ("Read", "read", True),
        ("Read", "glob", False),
        ("Task", "subagent", True),
        ("TodoWrite", "todo_write", True),
        ("WebSearch", "web_search", True),
        ("job_kill", "job_kill", True),
        ("Task(Explore)", "subagent", False),
        ("WebFetch(https://x/)", "web_fetch", False),
    ],
)
def test_tool_name_rules(rule: str, tool: str, matches: bool) -> None:
    assert decide(call(tool, url="https://x/"), allow=(rule,)) == (
        f"allow {rule}" if matches else None
    )


def test_a_specifier_dsh_does_not_match_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dsh.permissions"):
        parse_rule("Task(Explore)", "settings.json")
    assert 'settings.json: the permission rule "Task(Explore)" has a specifier' in caplog.text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'src: "" is not a permission rule'),
        ("Bash(npm", 'src: "Bash(npm" is not a permission rule'),
        ("Bash()", 'src: "Bash()" has an empty specifier'),
        ("Bash (x)", 'src: "Bash (x)" is not a permission rule'),
        (3, "src: a permission rule must be a string, got int"),
    ],
)
def test_bad_rules_are_refused_naming_the_rule_and_source(text: object, message: str) -> None:
    with pytest.raises(PermissionRuleError) as caught:
        parse_rule(text, "src")
    assert str(caught.value).startswith(message)
    assert caught.value.code == "PERMISSION_RULE"


def test_rule_sets_combine_and_an_empty_one_is_false() -> None:
    one = RuleSet(allow=(parse_rule("Read", "a"),))
    two = RuleSet(deny=(parse_rule("Read", "b"),))
    both = RuleSet.of([one, two])
    assert [r.source for r in both.deny + both.allow] == ["b", "a"]
    assert both
    assert not RuleSet()


# -- the names, the input, the splitter ----------------------------------------------------------


def test_claude_names() -> None:
    pairs = {
        "bash": "Bash",
        "read": "Read",
        "write": "Write",
        "edit": "Edit",
        "glob": "Glob",
        "grep": "Grep",
        "web_fetch": "WebFetch",
        "web_search": "WebSearch",
        "todo_write": "TodoWrite",
        "subagent": "Task",
        "mcp__s__t": "mcp__s__t",
        "job_output": "job_output",
    }
    for dsh_name, claude in pairs.items():
        assert claude_tool_name(dsh_name) == claude
        assert claude_tool_name(call(dsh_name)) == claude


def test_claude_tool_input() -> None:
    assert claude_tool_input(call("bash", command="ls", timeout_ms=5)) == {
        "command": "ls",
        "timeout": 5,
    }
    assert claude_tool_input(call("grep", pattern="x", case_insensitive=True)) == {
        "pattern": "x",
        "-i": True,
    }
    assert claude_tool_input(call("web_search", queries=["a", "b"])) == {
        "queries": ["a", "b"],
        "query": "a",
    }
    assert claude_tool_input(call("web_search", queries=[])) == {"queries": []}
    assert claude_tool_input(call("read", file_path="a")) == {"file_path": "a"}
    raw = ToolCall("c", name="edit", arguments='{"file_path": "x", "old_string": "a"}')
    assert claude_tool_input(raw) == {"file_path": "x", "old_string": "a"}


@pytest.mark.parametrize(
    ("command", "parts"),
    [
        ("a && b || c; d | e & f\ng", ["a", "b", "c", "d", "e", "f", "g"]),
        ("a |& b ;; c", ["a", "b", "c"]),
        ("echo 'x && y' && z", ["echo 'x && y'", "z"]),
        ("  ;; ", []),
        ("cmd 2>&1 && next", ["cmd 2>&1", "next"]),
        ("a\\&&b", ["a\\&", "b"]),
    ],
)
def test_split_command(command: str, parts: list[str]) -> None:
    assert split_command(command) == parts


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("echo $(x)", True),
        ("echo `x`", True),
        ('echo "$(x)"', True),
        ("echo '$(x)'", False),
        ("diff <(a) >(b)", True),
        ("echo (x)", False),
        ("(cd x)", False),
        ("echo 'it''s'", False),
    ],
)
def test_has_substitution(command: str, found: bool) -> None:
    assert has_substitution(command) is found
