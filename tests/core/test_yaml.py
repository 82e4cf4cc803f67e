"""Deployment files: entries, lines, ``!env`` placeholders and every structural error."""

from __future__ import annotations

import datetime
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from dsh._entry_values import line_of, resolve_env
from dsh._errors import ConfigError, DeploymentError
from dsh._yaml import EntrySpec, EnvRef, parse_deployment
from dsh.testing import write_deployment

Write = Callable[[str], Path]


@pytest.fixture
def write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Write:
    """Write ``dsh.yml`` in a fresh working directory and return its relative path."""
    monkeypatch.chdir(tmp_path)

    def _write(text: str) -> Path:
        return write_deployment(Path(), textwrap.dedent(text).lstrip("\n"))

    return _write


def failures(path: Path) -> list[str]:
    with pytest.raises(DeploymentError) as info:
        parse_deployment(path)
    assert info.value.failures == str(info.value).splitlines()[1:]
    return info.value.failures


def problem(write: Write, text: str) -> str:
    """The single failure reported for ``text``."""
    [only] = failures(write(text))
    return only


def parse_one(write: Write, text: str) -> EntrySpec:
    [spec] = parse_deployment(write(text))
    return spec


# -- the happy path ---------------------------------------------------------------------


def test_parses_entries_with_lines_and_raw_config(write: Write) -> None:
    path = write(
        """
        - id: llm
          name: llm-openai
          config:
            api_key: !env DEEPSEEK_API_KEY
            base_url: !env [DEEPSEEK_BASE_URL, https://api.deepseek.com]
        - id: agent-core
          name: agent-core
          config: {model: deepseek-chat, persona: "You are {{model}}."}
        - id: web
          name: tool-web
          disabled: true
        """
    )
    llm, core, web = parse_deployment(path)

    assert llm == EntrySpec(
        id="llm",
        name="llm-openai",
        config={
            "api_key": EnvRef("DEEPSEEK_API_KEY", None, 4),
            "base_url": EnvRef("DEEPSEEK_BASE_URL", "https://api.deepseek.com", 5),
        },
        disabled=False,
        group=False,
        children=[],
        file=path,
        line=1,
        config_node=llm.config_node,
    )
    assert isinstance(llm.config_node, yaml.MappingNode)
    assert llm.config_node.start_mark.line == 3
    assert llm.where == "dsh.yml:1: entry 'llm'"
    assert (core.id, core.name, core.line, core.disabled) == ("agent-core", "agent-core", 6, False)
    assert core.config == {"model": "deepseek-chat", "persona": "You are {{model}}."}
    assert (web.id, web.line, web.disabled, web.config, web.config_node) == (
        "web",
        9,
        True,
        None,
        None,
    )


def test_file_is_kept_as_given(tmp_path: Path) -> None:
    path = tmp_path / "deploy.yaml"
    path.write_text("- name: a\n", encoding="utf-8")
    [spec] = parse_deployment(path)
    assert spec.file is path
    assert spec.where == f"{path}:1: entry 'a@1'"


def test_scalars_follow_yaml_1_1_safe_loading(write: Write) -> None:
    spec = parse_one(
        write,
        """
        - name: p
          config:
            int: 3
            octal: 010
            float: 1.5e+3
            no_sign_exponent: 1.5e3
            yes_bool: yes
            off_bool: off
            null_value: ~
            empty:
            text: "010"
            day: 2024-01-02
            binary: !!binary aGk=
            forced: !!str 12
            list: [1, two, 3.0]
            1: integer key
        """,
    )
    assert spec.config == {
        "int": 3,
        "octal": 8,
        "float": 1500.0,
        "no_sign_exponent": "1.5e3",  # YAML 1.1 wants a signed exponent
        "yes_bool": True,
        "off_bool": False,
        "null_value": None,
        "empty": None,
        "text": "010",
        "day": datetime.date(2024, 1, 2),
        "binary": b"hi",
        "forced": "12",
        "list": [1, "two", 3.0],
        1: "integer key",
    }


@pytest.mark.parametrize(
    "text",
    ["", "# only a comment\n", "---\n", "~\n", "[]\n"],
    ids=["empty", "comment", "empty-document", "null", "empty-list"],
)
def test_empty_deployments(write: Write, text: str) -> None:
    assert parse_deployment(write(text)) == []


def test_generated_ids_use_name_or_group_and_line(write: Write) -> None:
    plugin, group = parse_deployment(
        write(
            """
            - name: tool-web
            - group: true
              config:
                - name: tool-web
            """
        )
    )
    assert (plugin.id, group.id, group.children[0].id) == ("tool-web@1", "group@2", "tool-web@4")


def test_groups_parse_children_recursively(write: Write) -> None:
    [group] = parse_deployment(
        write(
            """
            - id: outer
              group: true
              disabled: yes
              config:
                - id: a
                  name: plugin-a
                  config: {x: !env X}
                - id: inner
                  group: true
                  config:
                    - {id: b, name: plugin-b, disabled: true}
            """
        )
    )
    assert (group.id, group.name, group.group, group.disabled, group.config) == (
        "outer",
        None,
        True,
        True,
        None,
    )
    a, inner = group.children
    assert (a.id, a.name, a.line, a.config) == ("a", "plugin-a", 5, {"x": EnvRef("X", None, 7)})
    assert a.disabled is False
    assert (inner.id, inner.group, inner.line) == ("inner", True, 8)
    [b] = inner.children
    assert (b.id, b.name, b.disabled, b.line, b.children) == ("b", "plugin-b", True, 11, [])


@pytest.mark.parametrize("config", ["", "  config:\n", "  config: []\n"])
def test_group_without_children(write: Write, config: str) -> None:
    [group] = parse_deployment(write("- group: true\n" + config))
    assert (group.id, group.children) == ("group@1", [])


def test_merge_keys_and_anchors(write: Write) -> None:
    base, one, two = parse_deployment(
        write(
            """
            - name: base
              config: &defaults {model: m, retries: 2}
            - <<: {name: merged-name}
              id: one
              config:
                <<: *defaults
                retries: 5
            - name: two
              config: {shared: *defaults, list: [*defaults]}
            """
        )
    )
    assert base.config == {"model": "m", "retries": 2}
    assert (one.id, one.name) == ("one", "merged-name")
    assert one.config == {"model": "m", "retries": 5}
    assert two.config == {"shared": base.config, "list": [base.config]}


# -- !env ---------------------------------------------------------------------------------


def test_env_forms(write: Write) -> None:
    spec = parse_one(
        write,
        """
        - name: p
          config:
            plain: !env HOME_DIR
            pair: !env [PORT, 8080]
            empty_default: !env [TOKEN, ""]
            nested: [{deep: !env _X1}]
        """,
    )
    assert spec.config == {
        "plain": EnvRef("HOME_DIR", None, 3),
        "pair": EnvRef("PORT", "8080", 4),
        "empty_default": EnvRef("TOKEN", "", 5),
        "nested": [{"deep": EnvRef("_X1", None, 6)}],
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("!env {a: 1}", "!env takes a variable name or a [NAME, default] pair"),
        ("!env [A]", "!env takes a variable name or a [NAME, default] pair"),
        ("!env [A, b, c]", "!env takes a variable name or a [NAME, default] pair"),
        ("!env [A, [b]]", "!env takes a variable name or a [NAME, default] pair"),
        ("!env [A, !foo b]", "!env takes a variable name or a [NAME, default] pair"),
        ("!env", "!env: '' is not a valid environment variable name"),
        ("!env 1ABC", "!env: '1ABC' is not a valid environment variable name"),
        ("!env [A-B, x]", "!env: 'A-B' is not a valid environment variable name"),
        ("!env [A, null]", "!env: the default must not be null (use '' for empty)"),
        ("!env [A, ~]", "!env: the default must not be null (use '' for empty)"),
    ],
)
def test_env_errors(write: Write, value: str, message: str) -> None:
    assert problem(write, f"- id: p\n  name: p\n  config:\n    key: {value}\n") == (
        f"dsh.yml:4: entry 'p': {message}"
    )


def test_env_reports_name_and_default_problems_together(write: Write) -> None:
    assert failures(write("- id: p\n  name: p\n  config: !env [9, null]\n")) == [
        "dsh.yml:3: entry 'p': !env: '9' is not a valid environment variable name",
        "dsh.yml:3: entry 'p': !env: the default must not be null (use '' for empty)",
    ]


def test_env_outside_config_is_an_error(write: Write) -> None:
    assert failures(write("- id: p\n  name: !env NAME\n  disabled: !env OFF\n")) == [
        "dsh.yml:2: entry 'p': name must be a non-empty string, found a value tagged !env",
        "dsh.yml:3: entry 'p': disabled must be true or false, found a value tagged !env",
    ]


def test_resolve_env_substitutes_and_deep_copies(write: Write) -> None:
    spec = parse_one(
        write,
        """
        - id: p
          name: p
          config:
            key: !env KEY
            port: !env [PORT, "8080"]
            empty: !env EMPTY
            items: [!env KEY, {n: 1}]
        """,
    )
    environ = {"KEY": "secret", "EMPTY": ""}
    resolved = resolve_env(spec.config, spec, environ)
    assert resolved == {"key": "secret", "port": "8080", "empty": "", "items": ["secret", {"n": 1}]}
    resolved["items"][1]["n"] = 2
    assert spec.config["items"][1] == {"n": 1}
    assert spec.config["key"] == EnvRef("KEY", None, 4)


def test_resolve_env_reads_os_environ_by_default(
    write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = parse_one(write, "- name: p\n  config: {key: !env DSH_TEST_KEY}\n")
    monkeypatch.setenv("DSH_TEST_KEY", "from-env")
    assert resolve_env(spec.config, spec) == {"key": "from-env"}


def test_resolve_env_handles_tuples_and_other_values(tmp_path: Path) -> None:
    spec = EntrySpec("e", "p", None, False, False, [], tmp_path / "x.yml", 1)
    marker = [1, 2]
    value = (EnvRef("A", "d", 3), {"set": {1, 2}}, marker)
    resolved = resolve_env(value, spec, {})
    assert resolved == ("d", {"set": {1, 2}}, [1, 2])
    assert resolved[2] is not marker
    assert resolve_env(None, spec, {}) is None


def test_resolve_env_missing_variables(write: Write) -> None:
    spec = parse_one(
        write,
        """
        - id: llm
          name: llm-openai
          config:
            api_key: !env DSH_MISSING_KEY
            base_url: !env [DSH_BASE, https://x]
            other: !env DSH_MISSING_OTHER
        """,
    )
    with pytest.raises(ConfigError) as info:
        resolve_env(spec.config, spec, {})
    assert str(info.value) == (
        "dsh.yml:4: entry 'llm': environment variable DSH_MISSING_KEY is not set\n"
        "dsh.yml:6: entry 'llm': environment variable DSH_MISSING_OTHER is not set"
    )


def test_disabled_entries_keep_env_placeholders(write: Write) -> None:
    spec = parse_one(write, "- name: p\n  disabled: true\n  config: {key: !env NEVER_SET}\n")
    assert spec.disabled is True
    assert spec.config == {"key": EnvRef("NEVER_SET", None, 3)}


# -- structural errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\n", "dsh.yml:1: a deployment must be a list of entries, found a mapping"),
        ("just text\n", "dsh.yml:1: a deployment must be a list of entries, found 'just text'"),
        ("42\n", "dsh.yml:1: a deployment must be a list of entries, found 42 (int)"),
        (
            "!env X\n",
            "dsh.yml:1: a deployment must be a list of entries, found a value tagged !env",
        ),
        (
            "!!set {a}\n",
            "dsh.yml:1: a deployment must be a list of entries, found a value tagged !!set",
        ),
    ],
)
def test_root_must_be_a_list(write: Write, text: str, message: str) -> None:
    path = write(text)
    with pytest.raises(DeploymentError) as info:
        parse_deployment(path)
    assert str(info.value) == f"deployment dsh.yml has 1 problem:\n{message}"
    assert info.value.failures == [message]


@pytest.mark.parametrize(
    ("entry", "found"),
    [
        ("plugin-name", "'plugin-name'"),
        ("[a, b]", "a list"),
        ("~", "null"),
        ("true", "true (bool)"),
    ],
)
def test_entries_must_be_mappings(write: Write, entry: str, found: str) -> None:
    assert problem(write, f"- name: ok\n- {entry}\n") == (
        f"dsh.yml:2: an entry must be a mapping, found {found}"
    )


def test_unknown_keys(write: Write) -> None:
    assert failures(
        write(
            """
            - id: p
              name: p
              conifg: {}
              ? [complex]
              : 1
              2: two
            """
        )
    ) == [
        "dsh.yml:3: entry 'p': unknown key 'conifg' (expected one of: "
        "config, disabled, group, id, name)",
        "dsh.yml:4: entry 'p': unknown key a list (expected one of: "
        "config, disabled, group, id, name)",
        "dsh.yml:6: entry 'p': unknown key '2' (expected one of: "
        "config, disabled, group, id, name)",
    ]


@pytest.mark.parametrize(
    ("value", "found"),
    [("3", "3 (int)"), ('""', "''"), ("~", "null"), ("[a]", "a list")],
)
def test_id_must_be_a_non_empty_string(write: Write, value: str, found: str) -> None:
    assert problem(write, f"- name: p\n  id: {value}\n") == (
        f"dsh.yml:2: entry 'p@1': id must be a non-empty string, found {found}"
    )


def test_duplicate_ids_name_both_lines(write: Write) -> None:
    assert failures(
        write(
            """
            - id: a
              name: p
            - group: true
              config:
                - id: a
                  name: q
                - name: r
            - id: r@7
              name: r
            """
        )
    ) == [
        "dsh.yml:5: entry 'a': duplicate id (first used at line 1)",
        "dsh.yml:8: entry 'r@7': duplicate id (first used at line 7)",
    ]


def test_an_aliased_entry_is_a_duplicate(write: Write) -> None:
    # The second use of the anchor is the same node: its problems are reported once.
    assert failures(write("- &e {name: p, name: q}\n- *e\n")) == [
        "dsh.yml:1: entry 'q@1': duplicate key 'name' (first at line 1)",
        "dsh.yml:1: entry 'q@1': duplicate id (first used at line 1)",
    ]


def test_name_rules(write: Write) -> None:
    assert failures(
        write(
            """
            - id: missing
            - id: number
              name: 12
            - id: empty
              name: ""
            - id: named-group
              name: g
              group: true
            """
        )
    ) == [
        "dsh.yml:1: entry 'missing': missing required key 'name' (or 'group: true')",
        "dsh.yml:3: entry 'number': name must be a non-empty string, found 12 (int)",
        "dsh.yml:5: entry 'empty': name must be a non-empty string, found ''",
        "dsh.yml:7: entry 'named-group': a group takes no name",
    ]


def test_missing_name_without_id_gets_a_generic_id(write: Write) -> None:
    assert problem(write, "- config: {}\n") == (
        "dsh.yml:1: entry 'entry@1': missing required key 'name' (or 'group: true')"
    )


def test_flags_must_be_booleans(write: Write) -> None:
    assert failures(
        write(
            """
            - id: p
              name: p
              disabled: maybe
              group: 1
            """
        )
    ) == [
        "dsh.yml:3: entry 'p': disabled must be true or false, found 'maybe'",
        "dsh.yml:4: entry 'p': group must be true or false, found 1 (int)",
    ]


def test_group_false_is_a_plain_entry(write: Write) -> None:
    spec = parse_one(write, "- name: p\n  group: false\n  disabled: false\n  config: [1]\n")
    assert (spec.group, spec.disabled, spec.config, spec.children) == (False, False, [1], [])


def test_group_config_must_be_a_list(write: Write) -> None:
    assert problem(write, "- id: g\n  group: true\n  config: {name: p}\n") == (
        "dsh.yml:3: entry 'g': a group's config must be a list of entries, found a mapping"
    )


def test_group_children_errors_are_collected(write: Write) -> None:
    assert failures(
        write(
            """
            - id: g
              group: true
              config:
                - not-a-mapping
                - id: c
                  name: p
                  extra: 1
            """
        )
    ) == [
        "dsh.yml:4: an entry must be a mapping, found 'not-a-mapping'",
        "dsh.yml:7: entry 'c': unknown key 'extra' (expected one of: "
        "config, disabled, group, id, name)",
    ]


def test_config_value_errors(write: Write) -> None:
    assert failures(
        write(
            """
            - id: p
              name: p
              config:
                a: !!int abc
                b: !!bool maybe
                c: !!timestamp soon
                d: !!binary "a"
                e: !custom value
                f: !!python/object:os.system {}
                g: !!set {x}
                h: !!str [a]
                ? [k]
                : complex key
                ? !env K
                : env key
                a: duplicate
            """
        )
    ) == [
        "dsh.yml:4: entry 'p': invalid !!int value 'abc'",
        "dsh.yml:5: entry 'p': invalid !!bool value 'maybe'",
        "dsh.yml:6: entry 'p': invalid !!timestamp value 'soon'",
        "dsh.yml:7: entry 'p': invalid !!binary value 'a'",
        "dsh.yml:8: entry 'p': unsupported tag !custom",
        "dsh.yml:9: entry 'p': unsupported tag !!python/object:os.system",
        "dsh.yml:10: entry 'p': unsupported tag !!set",
        "dsh.yml:11: entry 'p': unsupported tag !!str",
        "dsh.yml:12: entry 'p': a mapping key must be a plain scalar, found a list",
        "dsh.yml:14: entry 'p': a mapping key must be a plain scalar, found a value tagged !env",
        "dsh.yml:16: entry 'p': duplicate key 'a' (first at line 4)",
    ]


def test_merge_errors(write: Write) -> None:
    assert failures(write("- id: p\n  name: p\n  config:\n    <<: 1\n    a: 2\n")) == [
        "dsh.yml:4: entry 'p': '<<' merges a mapping or a list of mappings, found 1 (int)",
    ]
    assert failures(write("- <<: [{id: p}, x]\n  name: p\n")) == [
        "dsh.yml:1: entry 'p': '<<' merges a mapping or a list of mappings, found 'x'",
    ]


def test_merge_precedence(write: Write) -> None:
    spec = parse_one(
        write,
        """
        - name: p
          config:
            <<: [{a: first, b: first}, {a: second, c: second}]
            c: own
        """,
    )
    assert spec.config == {"a": "first", "b": "first", "c": "own"}


def test_nested_merge_sources_are_not_duplicates(write: Write) -> None:
    first, second, third = parse_deployment(
        write(
            """
            - name: a
              config: {<<: &child {<<: &root {x: 1, z: 0}, x: 2}, y: 1}
            - name: b
              config: *child
            - name: c
              config: &self {<<: *self, x: 3}
            """
        )
    )
    assert first.config == {"x": 2, "z": 0, "y": 1}
    assert second.config == {"x": 2, "z": 0}
    assert third.config == {"x": 3}
    assert line_of(first, ("z",)) == 2


def test_equals_sign_scalars_stay_strings(write: Write) -> None:
    spec = parse_one(write, "- name: p\n  config: {=: 1, x: =}\n")
    assert spec.config == {"=": 1, "x": "="}


def test_explicit_bool_tag_with_bad_text_in_a_flag(write: Write) -> None:
    assert problem(write, "- id: p\n  name: p\n  disabled: !!bool maybe\n") == (
        "dsh.yml:3: entry 'p': disabled must be true or false, found maybe (bool)"
    )


def test_explicit_bool_tag_in_a_flag(write: Write) -> None:
    spec = parse_one(write, "- name: p\n  disabled: !!bool On\n")
    assert spec.disabled is True


def test_recursive_alias_is_rejected(write: Write) -> None:
    assert problem(write, "- id: p\n  name: p\n  config: &loop {self: *loop}\n") == (
        "dsh.yml:3: entry 'p': a recursive alias is not allowed"
    )


def test_aliased_config_problems_are_reported_once(write: Write) -> None:
    assert failures(
        write(
            """
            - id: p
              name: p
              config: &bad {x: !!int no}
            - id: q
              name: q
              config: *bad
            """
        )
    ) == ["dsh.yml:3: entry 'p': invalid !!int value 'no'"]


def test_every_problem_is_reported_sorted_by_line(write: Write) -> None:
    path = write(
        """
        - id: g
          group: true
          config:
            - name: p
              bogus: 1
          disabled: sometimes
        - 7
        """
    )
    with pytest.raises(DeploymentError) as info:
        parse_deployment(path)
    assert str(info.value) == (
        "deployment dsh.yml has 3 problems:\n"
        "dsh.yml:5: entry 'p@4': unknown key 'bogus' (expected one of: "
        "config, disabled, group, id, name)\n"
        "dsh.yml:6: entry 'g': disabled must be true or false, found 'sometimes'\n"
        "dsh.yml:7: an entry must be a mapping, found 7 (int)"
    )
    assert isinstance(info.value, DeploymentError)
    assert info.value.code == "DEPLOYMENT_FAILED"


# -- unreadable files and YAML syntax -----------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yml"
    with pytest.raises(DeploymentError) as info:
        parse_deployment(path)
    line = f"{path}: cannot read the file: No such file or directory"
    assert str(info.value) == f"deployment {path} has 1 problem:\n{line}"
    assert info.value.failures == [line]


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(DeploymentError, match="cannot read the file: Is a directory"):
        parse_deployment(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "- name: a\n\t- name: b\n",
            "dsh.yml:2:1: invalid YAML: while scanning for the next token, "
            "found character '\\t' that cannot start any token",
        ),
        ("- *nowhere\n", "dsh.yml:1:3: invalid YAML: found undefined alias 'nowhere'"),
        (
            "- name: a\n---\n- name: b\n",
            "dsh.yml:2:1: invalid YAML: expected a single document in the stream, "
            "but found another document",
        ),
        (
            "- name: a\n  config: {x: 1\n",
            "dsh.yml:3:1: invalid YAML: while parsing a flow mapping, "
            "expected ',' or '}', but got '<stream end>'",
        ),
    ],
    ids=["tab", "alias", "two-documents", "unclosed"],
)
def test_yaml_syntax_errors(write: Write, text: str, message: str) -> None:
    assert problem(write, text) == message


def test_invalid_utf8_names_the_line(write: Write) -> None:
    path = write("")
    path.write_bytes(b"- name: a\n- name: \xff\n")
    assert failures(path) == ["dsh.yml:2: the file is not valid UTF-8 (invalid start byte)"]


def test_utf8_bom_is_accepted(write: Write) -> None:
    path = write("")
    path.write_bytes(b"\xef\xbb\xbf- name: a\n")
    assert [spec.id for spec in parse_deployment(path)] == ["a@1"]


def test_control_characters_are_rejected(write: Write) -> None:
    assert problem(write, "- name: a\n- name: b\x07\n") == (
        "dsh.yml:2: invalid YAML: unacceptable character #x0007: special characters are not allowed"
    )


# -- line_of ------------------------------------------------------------------------------


def test_line_of_walks_pydantic_locations(write: Write) -> None:
    spec = parse_one(
        write,
        """
        - id: p
          name: p
          config:
            model: m
            nested:
              deep: 1
            items:
              - a
              - key: value
                other: 2
            <<: {merged: 1}
            merged: 2
            scalar: 5
        """,
    )
    assert line_of(spec, ()) == 4
    assert line_of(spec, ("model",)) == 4
    assert line_of(spec, ("nested",)) == 5
    assert line_of(spec, ("nested", "deep")) == 6
    assert line_of(spec, ("nested", "missing")) == 5
    assert line_of(spec, ("items", 1)) == 9
    assert line_of(spec, ("items", 1, "other")) == 10
    assert line_of(spec, ("items", 7)) == 7
    assert line_of(spec, ("items", "key")) == 7
    assert line_of(spec, ("items", -1)) == 7
    assert line_of(spec, ("scalar", "below")) == 13
    assert line_of(spec, ("merged",)) == 12
    assert line_of(spec, ("unknown", "x")) == 4


def test_line_of_without_config_is_the_entry_line(write: Write) -> None:
    _, spec = parse_deployment(write("- name: a\n- name: b\n"))
    assert line_of(spec, ("anything",)) == 2


def test_line_of_an_integer_key(write: Write) -> None:
    spec = parse_one(write, "- name: p\n  config:\n    1: one\n    2: two\n")
    assert line_of(spec, (2,)) == 4
