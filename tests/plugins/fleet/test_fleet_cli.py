"""``dsh fleet run`` and ``dsh fleet status``: in-process (``main``) and as a user runs
them; the driver killed mid-run, then run again, finishes only what is missing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from dsh import cli
from tests.plugins.fleet.fleet_support import (
    USAGE,
    answer_tasks,
    block,
    blocked_pid,
    fleet_deployment,
    lines,
    write_tasks,
)
from tests.support import HELLO, dsh_refused, run_dsh

pytestmark = pytest.mark.anyio


def test_run_then_run_again_then_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = fleet_deployment(tmp_path, store="sqlite")
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [*answer_tasks(2), {"id": "t3", "prompt": "fail"}]
    )
    args = ["fleet", "run", str(path), str(tasks)]
    assert cli.main([*args, "--concurrency", "1"]) == 1  # t3 failed
    first = capsys.readouterr()
    results = lines(first.out)
    assert [(r["task"], r["stop_reason"], r["output"]) for r in results] == [
        ("t1", "completed", "answer: answer 1"),
        ("t2", "completed", "answer: answer 2"),
        ("t3", "error", None),
    ]
    assert results[0]["usage"] == USAGE
    assert results[2]["usage"] is None
    assert first.err.splitlines() == [
        "fleet: [1/3] t1: completed",
        "fleet: [2/3] t2: completed",
        "fleet: [3/3] t3: error",
        "fleet: 3 tasks: 2 done, 1 error (0 skipped as finished)",
    ]
    assert cli.main(args) == 1
    again = capsys.readouterr()
    assert lines(again.out) == results
    assert again.err.splitlines()[-1] == "fleet: 3 tasks: 2 done, 1 error (3 skipped as finished)"
    assert "fleet: [1/3] t1: completed (finished before: skipped)" in again.err
    write_tasks(tasks, [*answer_tasks(3), {"id": "new", "prompt": "answer new"}])
    assert cli.main(["fleet", "status", str(path), str(tasks)]) == 0
    out = capsys.readouterr().out.splitlines()
    sessions = {r["task"]: r["session"] for r in results}
    assert out[:3] == [
        f"t1  done  {sessions['t1']}  stop completed  tokens 10 in / 2 out",
        f"t2  done  {sessions['t2']}  stop completed  tokens 10 in / 2 out",
        f"t3  failed  {sessions['t3']}  stop error  tokens -",
    ]
    assert out[3].startswith("new  pending  new-")
    assert out[3].endswith("  tokens -")
    assert out[4] == (
        "fleet: 4 tasks: 2 done, 0 running, 1 failed, 1 pending; tokens 20 in / 4 out"
    )


def test_bad_task_lines_are_reported_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fleet_deployment(tmp_path)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"id": "a", "prompt": "answer"}\n{"id": "a", "prompt": "again"}\n'
        '{"id": "b", "prompt": "x", "model": "nope"}\n{oops\n'
    )
    assert dsh_refused(capsys, "fleet", "run", str(path), str(tasks)) == [
        f"{tasks}: 3 bad task lines (nothing ran):",
        f'  {tasks}:2: duplicate task id "a" (first on line 1)',
        f'  {tasks}:3: unknown model "nope"; known models: "fleet-mock"',
        f"  {tasks}:4: not JSON (Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1))",
    ]
    assert not (tmp_path / "sessions").exists()
    assert cli.main(["fleet", "status", str(path), str(tasks)]) == 1
    assert "3 bad task lines" in capsys.readouterr().err


def test_a_task_whose_cwd_is_missing_is_a_bad_line_for_run_and_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fleet_deployment(tmp_path)
    (tmp_path / "repos" / "a").mkdir(parents=True)
    (tmp_path / "repos" / "b").touch()
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "a", "prompt": "answer a", "cwd": "repos/a"},
            {"id": "b", "prompt": "answer b", "cwd": "repos/b"},
            {"id": "c", "prompt": "answer c", "cwd": "/nope"},
        ],
    )
    for action in ("run", "status"):
        assert dsh_refused(capsys, "fleet", action, str(path), str(tasks)) == [
            f"{tasks}: 2 bad task lines (nothing ran):",
            f'  {tasks}:2: cwd "repos/b" ({tmp_path}/repos/b) is not a directory',
            f'  {tasks}:3: cwd "/nope" does not exist',
        ]
    assert not (tmp_path / "sessions").exists()


DEEP = 100_000


def test_a_line_nested_too_deeply_is_a_bad_line_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fleet_deployment(tmp_path)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"id": "a", "prompt": "answer"}\n'
        + "[" * DEEP
        + "]" * DEEP
        + "\n"
        + '{"a": ' * DEEP
        + "1"
        + "}" * DEEP
        + "\n"
        + '{"id": "b", "prompt": "x", "cwd": '
        + "[" * DEEP
        + "\n"
    )
    for action in ("run", "status"):
        assert dsh_refused(capsys, "fleet", action, str(path), str(tasks)) == [
            f"{tasks}: 3 bad task lines (nothing ran):",
            *(
                f"  {tasks}:{line}: not JSON (nested too deeply: a task is one flat object)"
                for line in (2, 3, 4)
            ),
        ]
    assert not (tmp_path / "sessions").exists()


def test_command_line_mistakes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = fleet_deployment(tmp_path)
    tasks = write_tasks(tmp_path / "tasks.jsonl", answer_tasks(1))
    run = ["fleet", "run", str(path), str(tasks)]
    assert cli.main([*run, "--engine", "ray"]) == 1
    assert 'unknown fleet engine "ray"; known engines: local (the ray engine comes with' in (
        capsys.readouterr().err
    )
    assert cli.main([*run, "--address", "127.0.0.1:6379"]) == 1
    assert "--address names a cluster to join" in capsys.readouterr().err
    assert cli.main(["fleet", "run", str(HELLO), str(tasks)]) == 1
    assert "the deployment has no fleet (add the fleet plugin)" in capsys.readouterr().err
    for bad in ("0", "many"):
        with pytest.raises(SystemExit):
            cli.main([*run, "--concurrency", bad])
        assert f"must be a positive integer, got '{bad}'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["fleet"])
    assert "ACTION" in capsys.readouterr().err


# -- as a user runs it ---------------------------------------------------------------------


async def test_the_driver_killed_then_run_again_finishes_only_what_is_missing(
    tmp_path: Path,
) -> None:
    path = fleet_deployment(tmp_path)
    control = tmp_path / "control"
    block(control, "b")
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [*answer_tasks(2), {"id": "blocked", "prompt": "block b"}, *answer_tasks(1, start=4)],
    )
    args = ["fleet", "run", str(path), str(tasks), "--concurrency", "1"]
    driver = await anyio.open_process(
        [sys.executable, "-m", "dsh", *args], stderr=subprocess.DEVNULL
    )
    exited = anyio.Event()
    out: list[bytes] = []

    async def watch() -> None:
        assert driver.stdout is not None
        out.extend([chunk async for chunk in driver.stdout])
        await driver.wait()
        exited.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        pid = await blocked_pid(control / "fifo", exited)
        assert pid == driver.pid  # the local engine runs sessions in the driver
        os.kill(driver.pid, signal.SIGKILL)
    assert driver.returncode == -signal.SIGKILL
    done = lines(b"".join(out).decode())
    assert [r["task"] for r in done] == ["t1", "t2"]  # then it died
    finished = {
        r["task"]: (tmp_path / "sessions" / r["session"] / "session.jsonl").read_bytes()
        for r in done
    }
    again = await anyio.to_thread.run_sync(lambda: run_dsh(*args))
    assert again.returncode == 0, again.stderr
    results = {r["task"]: r for r in lines(again.stdout)}
    assert {task: r["output"] for task, r in results.items()} == {
        "t1": "answer: answer 1",
        "t2": "answer: answer 2",
        "blocked": "resumed",
        "t4": "answer: answer 4",
    }
    assert "fleet: [1/4] t1: completed (finished before: skipped)" in again.stderr
    assert "fleet: [2/4] t2: completed (finished before: skipped)" in again.stderr
    for task, raw in finished.items():  # nothing was written to what had finished
        session = results[task]["session"]
        assert (tmp_path / "sessions" / session / "session.jsonl").read_bytes() == raw
    status = await anyio.to_thread.run_sync(
        lambda: run_dsh("fleet", "status", str(path), str(tasks))
    )
    assert status.stdout.splitlines()[-1] == (
        "fleet: 4 tasks: 4 done, 0 running, 0 failed, 0 pending; tokens 50 in / 10 out"
    )


NOISY_ENGINE = '''\
import json
import os
import subprocess
import sys

from dsh_fleet import LocalEngine


class Noisy(LocalEngine):
    """The local engine, writing to stdout every way a program can."""

    async def dispatch(self, jobs, *, on_result=None):
        print("NOISE from print")
        sys.stdout.flush()
        os.write(1, b"NOISE from fd 1\\n")
        subprocess.run(["echo", "NOISE from a child"], check=True)
        return await super().dispatch(jobs, on_result=on_result)


def apply(ctx, config):
    fleet = ctx.fleet
    return fleet.register_engine("noisy", lambda options: Noisy(fleet.run_job, 2))


inject = ["fleet"]
'''


def test_stdout_carries_the_results_alone(tmp_path: Path) -> None:
    (tmp_path / "noisy.py").write_text(NOISY_ENGINE)
    path = fleet_deployment(tmp_path, extra="- {id: noisy, name: ./noisy.py}")
    tasks = write_tasks(tmp_path / "tasks.jsonl", answer_tasks(2))
    done = run_dsh("fleet", "run", str(path), str(tasks), "--engine", "noisy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(r["task"] for r in results) == ["t1", "t2"]
    assert all(set(r) == {"task", "session", "output", "stop_reason", "usage"} for r in results)
    for noise in ("NOISE from print", "NOISE from fd 1", "NOISE from a child"):
        assert noise in done.stderr
