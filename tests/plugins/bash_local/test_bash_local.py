"""bash-local with real processes: exit codes, streams, timeouts that kill a whole
process group, cancellation, output caps, the environment, spawn failures, unloading."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from dsh import ConfigError, Context
from dsh.lifeline import LIFELINE
from dsh_bash import Bash, BashRequest, BashRun, BashSpawnError, BashUnavailableError
from dsh_bash_local import FIXED_ENV, LocalBash
from tests.plugins.bash.bash_support import (
    Started,
    alive,
    dies,
    entries,
    make_fifo,
    read_fifo,
    read_pid,
    run,
    shell,
    spill_file,
)
from tests.support import entry_after, failed_deployment

pytestmark = pytest.mark.anyio

FAST = {"kill_grace_ms": 200}


# -- exit codes and streams ----------------------------------------------------------------


async def test_exit_codes_and_both_streams() -> None:
    async with shell() as root:
        ok = await run(root, "printf out; printf err >&2")
        assert (ok.exit_code, ok.signal, ok.timed_out, ok.aborted) == (0, None, False, False)
        assert (ok.stdout.text, ok.stderr.text) == ("out", "err")
        assert ok.timeout_ms == 120_000
        failed = await run(root, "echo no >&2; exit 3", timeout_ms=5000)
        assert (failed.exit_code, failed.stdout.text, failed.stderr.text) == (3, "", "no\n")
        assert failed.timeout_ms == 5000


async def test_a_signal_that_kills_the_shell_is_named() -> None:
    async with shell() as root:
        result = await run(root, "kill -s USR1 $$")
        assert (result.exit_code, result.signal) == (None, "SIGUSR1")
        realtime = await run(root, "kill -s RTMIN+2 $$")
        assert realtime.signal == f"SIG{signal.SIGRTMIN + 2}"


async def test_stdin_is_empty() -> None:
    async with shell() as root:
        result = await run(root, "cat; echo done")
        assert result.stdout.text == "done\n"


async def test_the_working_directory(tmp_path: Path) -> None:
    async with shell() as root:
        result = await run(root, "pwd", cwd=str(tmp_path))
        assert result.stdout.text == f"{tmp_path}\n"
        here = await run(root, "pwd")
        assert here.stdout.text == f"{os.getcwd()}\n"


# -- timeouts, groups and cancellation -------------------------------------------------------


async def test_a_timeout_kills_the_grandchildren_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    async with shell(**FAST) as root:
        result = await run(
            root, f"sleep 100 & echo $! > {pid_file}; echo started; wait", timeout_ms=300
        )
    assert (result.timed_out, result.aborted, result.signal) == (True, False, "SIGTERM")
    assert result.stdout.text == "started\n"
    assert result.timeout_ms == 300
    await dies(read_pid(pid_file))


async def test_a_grandchild_that_ignores_sigterm_gets_sigkill(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = f"(trap '' TERM; exec sleep 100) & echo $! > {pid_file}; wait"
    async with shell(**FAST) as root:
        result = await run(root, command, timeout_ms=300)
    assert result.timed_out
    await dies(read_pid(pid_file))


async def test_a_shell_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    async with shell(**FAST) as root:
        result = await run(root, "trap '' TERM; while :; do sleep 0.05; done", timeout_ms=200)
    assert (result.timed_out, result.exit_code, result.signal) == (True, None, "SIGKILL")


async def test_what_the_shell_leaves_running_is_killed_when_it_exits(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    async with shell() as root:
        result = await run(root, f"sleep 100 & echo $! > {pid_file}; echo bye")
    assert (result.exit_code, result.timed_out, result.stdout.text) == (0, False, "bye\n")
    await dies(read_pid(pid_file))


async def test_a_process_that_left_the_group_cannot_hold_the_result_past_the_timeout(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    fifo = make_fifo(tmp_path)
    escape = (
        f"{sys.executable} -c 'import os, signal; os.setsid(); "
        f'open("{fifo}", "w").write("x"); signal.pause()\''  # alive until killed
    )
    # The shell waits until the child has left the group, then exits at once.
    command = f"{escape} & echo $! > {pid_file}; read x < {fifo}; echo out"
    # The deadline leaves room for a Python start on a loaded machine: the shell must
    # have exited normally before it.
    async with shell(**FAST) as root:
        result = await run(root, command, timeout_ms=2000)
    pid = read_pid(pid_file)
    try:
        # The shell exited at once; the pipes stayed open until the deadline.
        assert (result.exit_code, result.timed_out, result.stdout.text) == (0, True, "out\n")
        assert alive(pid)  # out of reach: it left the process group
    finally:
        os.kill(pid, signal.SIGKILL)


async def test_cancellation_kills_the_group_records_the_result_and_propagates(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    fifo = make_fifo(tmp_path)
    started = Started()
    command = f"sleep 100 & echo $! > {pid_file}; echo up; echo up > {fifo}; wait"
    async with shell(**FAST) as root, anyio.create_task_group() as tg:
        tg.start_soon(root.bash.run, BashRequest(command, on_start=started))
        assert await read_fifo(fifo) == "up\n"  # mid-command
        tg.cancel_scope.cancel()
    assert started.run is not None
    result = started.run.result
    assert result is not None
    assert (result.aborted, result.timed_out, result.signal) == (True, False, "SIGTERM")
    assert result.stdout.text == "up\n"
    await dies(started.run.pid)
    await dies(read_pid(pid_file))


async def test_the_caller_sees_the_cancellation() -> None:
    started = Started()
    seen: list[str] = []

    async def call(root: Context) -> None:
        try:
            await root.bash.run(BashRequest("exec sleep 100", on_start=started))
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise

    async with shell(**FAST) as root, anyio.create_task_group() as tg:
        tg.start_soon(call, root)
        await started.event.wait()
        tg.cancel_scope.cancel()
    assert seen == ["cancelled"]


async def test_a_cancellation_that_comes_while_the_shell_starts_still_kills_it() -> None:
    started = Started()
    async with shell(**FAST) as root:
        with anyio.CancelScope() as scope:
            scope.cancel()  # before the process exists
            await root.bash.run(BashRequest("exec sleep 100", on_start=started))
        assert scope.cancelled_caught
    assert started.run is not None
    assert started.run.result is not None
    assert started.run.result.aborted
    await dies(started.run.pid)


async def test_a_cancellation_during_the_timeout_grace_keeps_timed_out(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path)
    started = Started()
    # The first SIGTERM restores the default, then says so: the second one kills. (In
    # the other order a second SIGTERM could land before the default is back.)
    command = f"trap 'trap - TERM; echo term > {fifo}' TERM; while :; do sleep 0.05; done"
    async with shell(kill_grace_ms=60_000) as root, anyio.create_task_group() as tg:
        tg.start_soon(root.bash.run, BashRequest(command, timeout_ms=100, on_start=started))
        assert await read_fifo(fifo) == "term\n"  # the timeout fired: now in the grace
        tg.cancel_scope.cancel()
    assert started.run is not None
    result = started.run.result
    assert result is not None
    assert (result.timed_out, result.aborted, result.signal) == (True, False, "SIGTERM")


async def test_an_error_of_on_start_kills_the_command() -> None:
    pids: list[int] = []

    def boom(started: BashRun) -> None:
        pids.append(started.pid)
        raise RuntimeError("on_start failed")

    async with shell(**FAST) as root:
        request = BashRequest("exec sleep 100", on_start=boom)
        with pytest.raises(RuntimeError, match="on_start failed"):
            await root.bash.run(request)
    await dies(pids[0])


async def test_no_timeout_at_all() -> None:
    async with shell(default_timeout_ms=1) as root:
        result = await run(root, "sleep 0.2; echo late", timeout_ms=0)
    assert (result.timed_out, result.stdout.text, result.timeout_ms) == (False, "late\n", None)


# -- output caps ---------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "truncated"), [(99, False), (100, False), (101, True)])
async def test_output_at_one_below_and_one_above_the_cap(size: int, truncated: bool) -> None:
    whole = "a" * (size - 1) + "Z"
    async with shell(max_output_bytes=100) as root:
        result = await run(root, f"head -c {size - 1} /dev/zero | tr '\\0' a; printf Z")
        out = result.stdout
        assert out.truncated is truncated
        if not truncated:
            assert (out.text, out.spill_path) == (whole, None)
        else:
            assert out.text == whole[-100:]
            assert spill_file(out.spill_path) == (whole, 0o600, 0o700)


async def test_a_multibyte_character_across_the_cap_boundary() -> None:
    async with shell(max_output_bytes=7) as root:
        # 9 bytes: "€" (3) + "é" (2) + "é" (2) + "ab"; the tail starts inside "€".
        result = await run(root, "printf '€ééab'")
    assert (result.stdout.text, result.stdout.truncated) == ("ééab", True)


async def test_each_stream_has_its_own_cap_and_spill() -> None:
    async with shell(max_output_bytes=10) as root:
        result = await run(root, "printf 0123456789ABC >&2; printf small")
        assert spill_file(result.stderr.spill_path)[0] == "0123456789ABC"
    assert (result.stdout.text, result.stdout.truncated) == ("small", False)
    assert (result.stderr.text, result.stderr.truncated) == ("3456789ABC", True)


async def test_spill_files_go_with_the_executor(tmp_path: Path) -> None:
    async with shell(max_output_bytes=2, spill_dir=str(tmp_path)) as root:
        result = await run(root, "printf abcdef")
        assert result.stdout.spill_path is not None
        assert Path(result.stdout.spill_path).parent.parent == tmp_path
    assert entries(tmp_path) == []


# -- the environment -----------------------------------------------------------------------


async def test_secrets_are_scrubbed_and_the_fixed_variables_are_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("MY_API_KEY", "GITHUB_TOKEN", "db_password", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "leaked")
    monkeypatch.setenv("KEEP_ME", "kept")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("DSH_SESSION_ID", "stale")
    async with shell() as root:
        result = await run(root, "env")
    env = dict(line.split("=", 1) for line in result.stdout.text.splitlines() if "=" in line)
    assert "leaked" not in result.stdout.text
    assert env["KEEP_ME"] == "kept"
    for name, value in FIXED_ENV.items():
        assert env[name] == value
    assert "DSH_SESSION_ID" not in env


async def test_added_variables_the_session_id_and_a_custom_scrub_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_TOKEN", "visible with a custom list")
    monkeypatch.setenv("INTERNAL_URL", "hidden")
    async with shell(env={"FROM_CONFIG": "c", "NO_COLOR": "0"}, scrub_env=["internal"]) as root:
        request = BashRequest(
            "echo $MY_TOKEN/$INTERNAL_URL/$FROM_CONFIG/$FROM_CALL/$NO_COLOR/$DSH_SESSION_ID",
            env={"FROM_CALL": "r"},
            session_id="s-1",
        )
        result = await root.bash.run(request)
    assert result.stdout.text == "visible with a custom list//c/r/1/s-1\n"


async def test_the_widened_default_scrubs_names_and_urls_with_passwords(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    leaks = {
        "DATABASE_URL": "postgres://db/app",
        "AWS_ACCESS_KEY_ID": "AKIA",
        "MYSQL_PWD": "pw",
        "NPM_AUTH_TOKEN": "npm",
        "SMB_PASSWD": "pw",
        "GOOGLE_APPLICATION_CREDENTIALS": "/key.json",
        "UPSTREAM": "https://me:hunter2@mirror.example/",
    }
    for name, value in leaks.items():
        monkeypatch.setenv(name, value)
    async with shell() as root:
        result = await run(root, "env")
    names = {line.split("=", 1)[0] for line in result.stdout.text.splitlines()}
    assert names.isdisjoint(leaks)
    assert {"PATH", "HOME"} <= names
    async with shell(scrub_url_passwords=False, scrub_env=[]) as root:
        result = await run(root, "echo $UPSTREAM $MYSQL_PWD")
    assert result.stdout.text == "https://me:hunter2@mirror.example/ pw\n"


async def test_a_command_carries_the_lifeline_mark() -> None:
    async with shell() as root:
        result = await run(root, "echo $DSH_LIFELINE")
    assert result.stdout.text == f"{LIFELINE.token}\n"


# -- spawn failures and unloading ----------------------------------------------------------


async def test_a_missing_working_directory_is_a_spawn_failure(tmp_path: Path) -> None:
    async with shell() as root:
        with pytest.raises(BashSpawnError) as info:
            await run(root, "true", cwd=str(tmp_path / "nope"))
    assert str(info.value).startswith(
        f'cannot start bash: the working directory "{tmp_path / "nope"}" cannot be used'
    )
    assert info.value.code == "BASH_SPAWN_FAILED"


async def test_a_shell_that_cannot_start_is_a_spawn_failure(tmp_path: Path) -> None:
    async with shell(shell=str(tmp_path / "no-such-shell")) as root:
        with pytest.raises(BashSpawnError, match=r"cannot start .*no-such-shell: No such file"):
            await run(root, "true")


async def test_unloading_the_executor_kills_what_runs(tmp_path: Path) -> None:
    started = Started()
    errors: list[BaseException] = []

    async def call(root: Context) -> None:
        try:
            await root.bash.run(BashRequest("exec sleep 100", on_start=started))
        except BashUnavailableError as exc:
            errors.append(exc)

    async with Context() as root:
        await root.plugin(Bash)
        executor = await root.plugin(LocalBash, {**FAST, "spill_dir": str(tmp_path)})
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, root)
            await started.event.wait()
            await executor.dispose()
        assert root.bash.executor is None
    assert "the bash executor was unloaded while the command ran" in str(errors[0])
    assert started.run is not None
    assert started.run.result is not None
    assert started.run.result.signal == "SIGTERM"
    await dies(started.run.pid)


async def test_mounting_and_disposing_restores_the_seam() -> None:
    async with Context() as root:
        await root.plugin(Bash)
        fiber = await root.plugin(LocalBash)
        assert repr(root.bash.executor) == "<LocalExecutor 'bash'>"
        assert root.bash.executor.max_timeout_ms == 600_000
        await fiber.dispose()
        assert root.bash._executors == []


# -- config --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"default_timeout_ms": 700_000}, r"default_timeout_ms \(700000\) is over max_timeout_ms"),
        ({"max_output_bytes": 0}, r"greater than 0 \(at max_output_bytes\)"),
        ({"kill_grace_ms": -1}, r"\(at kill_grace_ms\)"),
        ({"scrub": []}, r"Extra inputs are not permitted \(at scrub\)"),
    ],
)
async def test_bad_configs(config: dict[str, object], problem: str) -> None:
    async with Context() as root:
        await root.plugin(Bash)
        with pytest.raises(ConfigError, match=problem):
            await root.plugin(LocalBash, config)
        assert root.bash.executor is None


async def test_a_bad_config_is_located_in_the_deployment(tmp_path: Path) -> None:
    entries = entry_after("- {id: seam, name: bash}", "local", "bash-local", "{max_timeout_ms: 0}")
    path, error = await failed_deployment(tmp_path, entries)
    assert f"{path}:2" in str(error)
    assert "local" in str(error)
    assert "max_timeout_ms" in str(error)
