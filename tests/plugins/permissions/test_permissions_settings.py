"""The settings files: where they are found, how they are read, how a rule is added."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dsh_permissions import (
    PermissionRuleError,
    SettingsError,
    SettingsFile,
    add_rule,
    load_settings,
    project_dir,
    rules_of_settings,
    settings_files,
)
from tests.plugins.settings_support import own_home
from tests.plugins.settings_support import write_settings as write


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return own_home(tmp_path, monkeypatch)


def test_files_from_the_cwd_up_then_the_users(home: Path, tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "repo" / "sub"
    inner.mkdir(parents=True)
    repo = outer / "repo"
    made = [
        write(repo / ".claude" / "settings.json", {}),
        write(repo / ".claude" / "settings.local.json", {}),
        write(repo / ".dsh" / "settings.local.json", {}),
        write(outer / ".claude" / "settings.json", {}),
        write(home / ".claude" / "settings.json", {}),
    ]
    assert settings_files(inner) == [
        SettingsFile(made[0], "project", repo),
        SettingsFile(made[1], "local", repo),
        SettingsFile(made[2], "dsh-local", repo),
        SettingsFile(made[3], "project", outer),
        SettingsFile(made[4], "user", home),
    ]


def test_the_home_directory_is_never_a_project(home: Path) -> None:
    write(home / ".claude" / "settings.json", {})
    write(home / ".claude" / "settings.local.json", {})
    (home / "work").mkdir()
    assert [f.kind for f in settings_files(home / "work")] == ["user"]
    assert settings_files(home / "nothing-here") == [
        SettingsFile(home / ".claude" / "settings.json", "user", home)
    ]


def test_no_files(home: Path, tmp_path: Path) -> None:
    assert settings_files(tmp_path) == []


def test_load_settings(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path / "a.json", {"permissions": {"allow": ["Read"]}})) == {
        "permissions": {"allow": ["Read"]}
    }
    assert load_settings(write(tmp_path / "empty.json", "  \n")) == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n  "permissions": {,\n}', r"bad\.json:2:19: not valid JSON: Expecting property name"),
        ("[1]", r"bad\.json: a settings file must hold a JSON object, got list"),
    ],
)
def test_bad_files_are_named_with_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message) as caught:
        load_settings(write(tmp_path / "bad.json", text))
    assert caught.value.code == "PERMISSION_SETTINGS"


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"cannot read the settings file"):
        load_settings(tmp_path)
    write(tmp_path / "latin.json", "")
    (tmp_path / "latin.json").write_bytes(b"\xff\xfe")
    with pytest.raises(SettingsError, match=r"latin\.json: cannot read"):
        load_settings(tmp_path / "latin.json")


def test_rules_of_settings(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    rules = rules_of_settings(
        path, {"permissions": {"deny": ["Read(/x)"], "allow": ["Bash"]}}, tmp_path
    )
    assert [r.text for r in rules.deny] == ["Read(/x)"]
    assert rules.deny[0].project == str(tmp_path)
    assert rules.deny[0].source == f'{path}: "permissions.deny"[0]'
    assert rules.ask == ()
    assert not rules_of_settings(path, {"hooks": {}}, tmp_path)


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ({"permissions": []}, SettingsError, r'"permissions" must be an object'),
        ({"permissions": {"allow": "Bash"}}, SettingsError, r'"permissions\.allow" must be a list'),
        (
            {"permissions": {"ask": ["Bash(x"]}},
            PermissionRuleError,
            r'"permissions\.ask"\[0\]: "Bash\(x"',
        ),
    ],
)
def test_bad_permissions_are_named(
    tmp_path: Path, data: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        rules_of_settings(tmp_path / "s.json", data, tmp_path)


def test_project_dir(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    deep = repo / "a" / "b"
    deep.mkdir(parents=True)
    assert project_dir(deep) == deep  # no mark anywhere: the cwd itself
    (repo / ".git").mkdir()
    assert project_dir(deep) == repo
    (repo / "a" / ".dsh").mkdir()
    assert project_dir(deep) == repo / "a"
    (home / ".claude").mkdir()
    (home / "x").mkdir()
    assert project_dir(home / "x") == home / "x"


def test_add_rule_makes_the_file_and_keeps_other_keys(tmp_path: Path) -> None:
    target = tmp_path / ".dsh" / "settings.local.json"
    assert add_rule(target, "allow", "Bash(make)")
    assert json.loads(target.read_text()) == {"permissions": {"allow": ["Bash(make)"]}}
    write(target, {"hooks": {"Stop": []}, "permissions": {"deny": ["Read"], "allow": ["Read"]}})
    assert add_rule(target, "allow", "Bash(make)")
    assert not add_rule(target, "allow", "Bash(make)")
    assert json.loads(target.read_text()) == {
        "hooks": {"Stop": []},
        "permissions": {"deny": ["Read"], "allow": ["Read", "Bash(make)"]},
    }
    assert [p.name for p in target.parent.iterdir()] == ["settings.local.json"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{oops", r"not valid JSON"),
        ({"permissions": 1}, r'"permissions" must be an object'),
        ({"permissions": {"allow": {}}}, r'"permissions\.allow" must be a list of rules'),
    ],
)
def test_add_rule_leaves_a_bad_file_as_it_was(tmp_path: Path, data: object, message: str) -> None:
    target = write(tmp_path / "s.json", data)
    before = target.read_text()
    with pytest.raises(SettingsError, match=message):
        add_rule(target, "allow", "Read")
    assert target.read_text() == before


def test_add_rule_that_cannot_write_names_the_file(tmp_path: Path) -> None:
    blocker = write(tmp_path / "file", "")
    with pytest.raises(SettingsError, match=r"cannot write the settings file"):
        add_rule(blocker / "s.json", "allow", "Read")


def test_a_failed_replace_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(SettingsError, match=r"s\.json: cannot write the settings file: disk full"):
        add_rule(tmp_path / "s.json", "allow", "Read")
    assert list(tmp_path.iterdir()) == []
