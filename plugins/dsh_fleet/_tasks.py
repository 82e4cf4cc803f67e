"""Task files (``TASKS.jsonl``) and the session id of each task."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_session import SESSION_ID

from ._errors import TaskFileError

__all__ = ["TASK_KEYS", "Task", "read_tasks", "session_id_for"]

#: The keys a task line may have (``id`` and ``prompt`` are required).
TASK_KEYS = ("id", "prompt", "cwd", "model")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: How many characters of a task id its session id keeps (before the digest).
_SLUG_CHARS = 64
_DIGEST_CHARS = 16


@dataclass(frozen=True, slots=True)
class Task:
    """One line of a tasks file: ``cwd`` is an absolute path to a folder that existed
    when the file was read (a relative one is taken from the tasks file's folder, ``~``
    is expanded), ``model`` None when the line names none."""

    id: str
    prompt: str
    cwd: str | None = None
    model: str | None = None
    #: The line of the tasks file it came from (0: not from a file).
    line: int = 0


def session_id_for(deployment: str, task_id: str) -> str:
    """The session id of task ``task_id`` in the fleet ``deployment`` (its name): the
    task id made a plain name (at most 64 characters), ``-``, then 16 hex digits of the
    sha256 of both, so different tasks (or fleets) never share a session and the same
    task always finds its own. It satisfies ``dsh_session.SESSION_ID``."""
    slug = _UNSAFE.sub("-", task_id).lstrip("._-")[:_SLUG_CHARS].rstrip("._-") or "task"
    digest = hashlib.sha256(f"{deployment}\0{task_id}".encode()).hexdigest()
    session_id = f"{slug}-{digest[:_DIGEST_CHARS]}"
    assert SESSION_ID.fullmatch(session_id)  # a slug of plain characters, a hex digest
    return session_id


def _folder_problems(cwd: str, resolved: str) -> list[str]:
    """What keeps the folder ``resolved`` (a task's ``cwd`` made absolute) from being a
    task's working directory: nothing, or one problem naming ``cwd`` as written."""
    shown = f'cwd "{cwd}"'
    if resolved != cwd:
        shown += f" ({resolved})"
    try:
        mode = os.stat(resolved).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return [f"{shown} does not exist"]
    except OSError as exc:  # a symlink loop, a parent without search permission
        return [f"{shown} cannot be used: {exc.strerror}"]
    return [] if stat.S_ISDIR(mode) else [f"{shown} is not a directory"]


def _task_of(
    value: Any, where: str, folder: Path, models: Collection[str], default_model: str | None
) -> tuple[Task | None, list[str]]:
    """The task a decoded line holds, or the problems it has."""
    if not isinstance(value, dict):
        return None, [f"{where}: a task is a JSON object, got {type(value).__name__}"]
    problems: list[str] = []
    unknown = sorted(set(value) - set(TASK_KEYS))
    if unknown:
        problems.append(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; a task has "
            f"{', '.join(TASK_KEYS)}"
        )
    problems.extend(f"{where}: missing `{key}`" for key in ("id", "prompt") if key not in value)
    task_id = value.get("id")
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)
    if "id" in value and (not isinstance(task_id, str) or not task_id):
        problems.append(f"{where}: `id` must be a non-empty string (or an integer)")
    prompt = value.get("prompt")
    if "prompt" in value and (not isinstance(prompt, str) or not prompt.strip()):
        problems.append(f"{where}: `prompt` must be a non-empty string")
    cwd = value.get("cwd")
    resolved: str | None = None
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        problems.append(f"{where}: `cwd` must be a non-empty string (a folder)")
    elif cwd is not None:
        resolved = os.path.abspath(folder / os.path.expanduser(cwd))
        problems.extend(f"{where}: {problem}" for problem in _folder_problems(cwd, resolved))
    model = value.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        problems.append(f"{where}: `model` must be a non-empty string")
    elif (model or default_model) is None:
        problems.append(
            f"{where}: the task names no model, and the fleet has none (set `model` on "
            "the task or in the fleet's config, or declare one agent with a model)"
        )
    elif model is not None and model not in models:
        known = ", ".join(f'"{m}"' for m in sorted(models)) or "(none)"
        problems.append(f'{where}: unknown model "{model}"; known models: {known}')
    if problems:
        return None, problems
    return Task(str(task_id), str(prompt), resolved, model), []


def read_tasks(
    path: Path, *, models: Collection[str], default_model: str | None = None
) -> list[Task]:
    """The tasks of the JSON-lines file ``path``, in file order (blank lines skipped).

    Every line is checked before anything runs: a line that is not a JSON object (or
    is nested too deeply to decode), a missing or malformed
    ``id``/``prompt``/``cwd``/``model``, a ``cwd`` that is not an existing folder
    (relative to the file's folder), an unknown key, a model no adapter serves
    (``models``), a task without a model when there is no ``default_model``, and an id
    repeated. Raises :class:`TaskFileError` listing every problem as
    ``<path>:<line>: …``.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        problem = f"{path}: cannot read the tasks file: {exc.strerror or exc}"
        raise TaskFileError(problem, [problem]) from exc
    tasks: list[Task] = []
    problems: list[str] = []
    first: dict[str, int] = {}
    folder = path.parent.absolute()
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = json.loads(line)
        except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
            problems.append(f"{where}: not JSON ({exc})")
            continue
        except RecursionError:  # the decoder's depth limit: [[[[… or {"a": {"a": …
            problems.append(f"{where}: not JSON (nested too deeply: a task is one flat object)")
            continue
        task, found = _task_of(value, where, folder, models, default_model)
        problems.extend(found)
        if task is None:
            continue
        if task.id in first:
            problems.append(
                f'{where}: duplicate task id "{task.id}" (first on line {first[task.id]})'
            )
            continue
        first[task.id] = number
        tasks.append(Task(task.id, task.prompt, task.cwd, task.model, number))
    if problems:
        count = len(problems)
        raise TaskFileError(
            f"{path}: {count} bad task line{'s' if count != 1 else ''} (nothing ran):\n  "
            + "\n  ".join(problems),
            problems,
        )
    return tasks
