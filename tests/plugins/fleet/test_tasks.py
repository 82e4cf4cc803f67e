"""Task files and session ids: every bad line is reported at its place before anything
runs; a task's session id is a plain name fixed by the fleet and the task id."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_fleet import Task, TaskFileError, read_tasks, session_id_for
from dsh_session import SESSION_ID

MODELS = ("m1", "m2")


def tasks_file(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "tasks.jsonl"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def problems(path: Path, default_model: str | None = "m1") -> list[str]:
    with pytest.raises(TaskFileError) as info:
        read_tasks(path, models=MODELS, default_model=default_model)
    assert info.value.code == "FLEET_TASKS"
    assert str(info.value).startswith(f"{path}: {len(info.value.problems)} bad task line")
    return [problem.removeprefix(f"{path}:") for problem in info.value.problems]


def test_good_lines_become_tasks_in_file_order(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    path = tasks_file(
        tmp_path,
        '{"id": "a", "prompt": "one"}\n'
        "\n"
        '{"id": 7, "prompt": "two", "model": "m2", "cwd": "repo"}\n'
        f'   \n{{"id": "c", "prompt": "three", "cwd": "{tmp_path}/repo/../repo/"}}',
    )
    assert read_tasks(path, models=MODELS, default_model="m1") == [
        Task("a", "one", None, None, 1),
        Task("7", "two", str(tmp_path / "repo"), "m2", 3),
        Task("c", "three", str(tmp_path / "repo"), None, 5),
    ]
    assert read_tasks(tasks_file(tmp_path, ""), models=MODELS) == []


def test_every_bad_line_is_reported_at_its_place(tmp_path: Path) -> None:
    path = tasks_file(
        tmp_path,
        '{"id": "a", "prompt": "one"}\n'
        "not json\n"
        '["a list"]\n'
        '{"prompt": "no id"}\n'
        '{"id": "b"}\n'
        '{"id": "a", "prompt": "again"}\n'
        '{"id": "c", "prompt": "x", "model": "gpt-9"}\n'
        '{"id": "d", "prompt": "x", "promt": "typo"}\n'
        '{"id": true, "prompt": " ", "cwd": 3, "model": ""}\n'
        '{"id": "", "prompt": 5}\n',
    )
    assert problems(path) == [
        "2: not JSON (Expecting value: line 1 column 1 (char 0))",
        "3: a task is a JSON object, got list",
        "4: missing `id`",
        "5: missing `prompt`",
        '6: duplicate task id "a" (first on line 1)',
        '7: unknown model "gpt-9"; known models: "m1", "m2"',
        "8: unknown key(s) 'promt'; a task has id, prompt, cwd, model",
        "9: `id` must be a non-empty string (or an integer)",
        "9: `prompt` must be a non-empty string",
        "9: `cwd` must be a non-empty string (a folder)",
        "9: `model` must be a non-empty string",
        "10: `id` must be a non-empty string (or an integer)",
        "10: `prompt` must be a non-empty string",
    ]


def test_a_cwd_must_be_an_existing_folder_relative_to_the_tasks_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "home" / "repo").mkdir(parents=True)
    (tmp_path / "a-file").touch()
    (tmp_path / "loop").symlink_to("loop")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "home")  # relative cwds are not taken from here
    path = tasks_file(
        tmp_path,
        '{"id": "a", "prompt": "x", "cwd": "/nope"}\n'
        '{"id": "b", "prompt": "x", "cwd": "repo"}\n'
        '{"id": "c", "prompt": "x", "cwd": "a-file"}\n'
        '{"id": "d", "prompt": "x", "cwd": "a-file/below"}\n'
        '{"id": "e", "prompt": "x", "cwd": "loop"}\n'
        '{"id": "f", "prompt": "x", "cwd": "~/repo"}\n'
        '{"id": "g", "prompt": "x", "cwd": "/nope", "model": "m9"}\n',
    )
    assert problems(path) == [
        '1: cwd "/nope" does not exist',
        f'2: cwd "repo" ({tmp_path}/repo) does not exist',
        f'3: cwd "a-file" ({tmp_path}/a-file) is not a directory',
        f'4: cwd "a-file/below" ({tmp_path}/a-file/below) does not exist',
        f'5: cwd "loop" ({tmp_path}/loop) cannot be used: Too many levels of symbolic links',
        '7: cwd "/nope" does not exist',
        '7: unknown model "m9"; known models: "m1", "m2"',
    ]
    [good] = read_tasks(
        tasks_file(tmp_path, '{"id": "f", "prompt": "x", "cwd": "~/repo"}'),
        models=MODELS,
        default_model="m1",
    )
    assert good.cwd == str(tmp_path / "home" / "repo")


def test_a_task_needs_a_model_when_the_fleet_has_none(tmp_path: Path) -> None:
    path = tasks_file(
        tmp_path, '{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "x", "model": "m1"}'
    )
    assert problems(path, default_model=None) == [
        "1: the task names no model, and the fleet has none (set `model` on the task or "
        "in the fleet's config, or declare one agent with a model)"
    ]
    with pytest.raises(TaskFileError, match=r"known models: \(none\)"):
        read_tasks(tasks_file(tmp_path, '{"id": "a", "prompt": "x", "model": "m"}'), models=())


def test_a_file_that_cannot_be_read_or_decoded(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(TaskFileError) as info:
        read_tasks(missing, models=MODELS)
    assert str(info.value) == f"{missing}: cannot read the tasks file: No such file or directory"
    assert info.value.problems == [str(info.value)]
    path = tasks_file(tmp_path, b'{"id": "a", "prompt": "x"}\n{"id": "\xff"}\n')
    [problem] = problems(path)
    assert problem.startswith("2: not JSON (")


def test_session_ids_are_plain_fixed_and_distinct() -> None:
    first = session_id_for("/w/dsh.yml", "task-1")
    assert first == session_id_for("/w/dsh.yml", "task-1")
    assert first.startswith("task-1-")
    assert len(first) == len("task-1-") + 16
    assert session_id_for("/other/dsh.yml", "task-1") != first
    odd = ["a/b", "a b", "../../etc", "", "...", "é", "x" * 500, "-lead", "trail."]
    ids = {session_id_for("/w/dsh.yml", task) for task in [*odd, "a_b", "a-b"]}
    assert len(ids) == len(odd) + 2
    for session_id in ids:
        assert SESSION_ID.fullmatch(session_id), session_id
    assert session_id_for("f", "a/b").startswith("a-b-")
    assert session_id_for("f", "../../etc").startswith("etc-")
    assert session_id_for("f", "...").startswith("task-")
    assert len(session_id_for("f", "x" * 500)) == 64 + 1 + 16
