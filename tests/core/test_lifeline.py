"""dsh.lifeline and its watcher: listed process groups and marked processes are killed
when the pipe of the process that listed them ends (RFC 0024), by a watcher armed
before the first of them starts (RFC 0053)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from dsh import _watcher
from dsh.lifeline import LIFELINE, MARK, Lifeline, open_process, reap
from tests.core.lifeline_support import PATIENCE, await_exits, environ_of, marked

KILLED = -signal.SIGKILL


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """``sleep 1000`` processes a test starts; those left are killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def sleeper(
    started: list[subprocess.Popen[bytes]], env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(["sleep", "1000"], start_new_session=True, env=env)
    started.append(process)
    return process


def end(lifeline: Lifeline) -> None:
    """What the end of the process that holds ``lifeline`` does: its pipe closes; then
    wait for the watcher to exit."""
    lifeline._close()
    assert lifeline._watcher is not None
    assert lifeline._watcher.wait(PATIENCE) == 0


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- the watcher, in this process -----------------------------------------------------------


def test_at_the_end_of_its_pipe_the_watcher_kills_the_groups_still_listed(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    listed, released, kept = sleeper(sleepers), sleeper(sleepers), sleeper(sleepers)
    read, write = os.pipe()
    lines = f"+{listed.pid}\n+{released.pid}\n+999999999\n-{released.pid}\n"
    os.write(write, lines.encode())
    os.close(write)
    _watcher.serve(read, "no-such-token")
    assert listed.wait(PATIENCE) == KILLED
    assert (released.poll(), kept.poll()) == (None, None)


def test_the_sweep_kills_the_processes_with_the_mark_and_no_other(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    token = f"test-{os.getpid()}-sweep"
    mine = sleeper(sleepers, {**os.environ, MARK: token})
    other = sleeper(sleepers, {**os.environ, MARK: f"{token}-other"})
    assert _watcher.sweep(token) == 1
    assert mine.wait(PATIENCE) == KILLED
    assert other.poll() is None
    assert _watcher.sweep(token) == 0


def test_marked_skips_other_names_this_process_and_processes_that_are_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = f"\0{MARK}=x\0".encode()
    monkeypatch.setenv(MARK, "x")  # this process carries it, and is not listed
    monkeypatch.setattr(os, "listdir", lambda _: ["self", str(os.getpid()), "999999999"])
    assert _watcher.marked(entry) == []


def test_the_sweeps_end_after_a_bound_when_marked_processes_keep_appearing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sweeps: list[str] = []

    def sweep(token: str) -> int:
        sweeps.append(token)
        return 1  # one more found every time

    monkeypatch.setattr(_watcher, "sweep", sweep)
    read, write = os.pipe()
    os.close(write)
    _watcher.serve(read, "t")
    assert sweeps == ["t"] * 20


# -- a lifeline and its watcher process -----------------------------------------------------


def test_closing_the_pipe_kills_the_listed_groups_and_not_the_released_ones(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    lifeline = Lifeline()
    assert (lifeline.watcher_pid, lifeline.groups) == (None, frozenset())
    listed, released = sleeper(sleepers), sleeper(sleepers)
    lifeline.watch(listed.pid)  # starts the watcher
    lifeline.watch(released.pid)
    lifeline.release(released.pid)
    assert lifeline.groups == {listed.pid}
    assert repr(lifeline) == f"<Lifeline {lifeline.token} watching 1 group(s)>"
    watcher = lifeline.watcher_pid
    assert watcher is not None
    lifeline.start()  # running already: the same watcher
    assert lifeline.watcher_pid == watcher
    end(lifeline)
    assert listed.wait(PATIENCE) == KILLED
    assert released.poll() is None


def test_a_killed_watcher_is_replaced_and_told_every_group(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    lifeline = Lifeline()
    first, second = sleeper(sleepers), sleeper(sleepers)
    lifeline.watch(first.pid)
    old = lifeline.watcher_pid
    assert old is not None
    os.kill(old, signal.SIGKILL)
    await_exits([old], PATIENCE)  # its pidfd is readable once it died (a zombie until reaped)
    assert Path(f"/proc/{old}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    lifeline.watch(second.pid)  # the pipe is broken: a new watcher
    assert lifeline.watcher_pid not in (None, old)
    assert gone(old)  # reaped
    end(lifeline)
    assert (first.wait(PATIENCE), second.wait(PATIENCE)) == (KILLED, KILLED)


def test_the_watcher_is_armed_when_start_returns(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    # start() returns once the watcher said it is armed: it runs its program and ignores
    # the signals aimed at dsh already, so one look at /proc suffices
    lifeline = Lifeline()
    listed = sleeper(sleepers)
    lifeline.start()
    watcher = lifeline.watcher_pid
    assert watcher is not None
    assert b"_watcher.py" in Path(f"/proc/{watcher}/cmdline").read_bytes()
    assert _ignored(watcher) == set(_watcher.IGNORED)
    for number in _watcher.IGNORED:
        os.kill(watcher, number)
    assert not gone(watcher)
    assert os.getsid(watcher) == watcher  # a session of its own: a group kill misses it
    lifeline.watch(listed.pid)
    end(lifeline)
    assert listed.wait(PATIENCE) == KILLED


@pytest.fixture
def dispositions() -> Iterator[None]:
    """This process's handlers of the watcher's signals, put back afterwards."""
    saved = {number: signal.getsignal(number) for number in _watcher.IGNORED}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


@pytest.mark.usefixtures("dispositions")
def test_main_ignores_the_signals_then_says_armed_then_serves() -> None:
    read, write = os.pipe()
    announced, armed = os.pipe()
    os.close(write)  # dsh is gone already: serve returns at once
    _watcher.main([str(read), str(armed), "no-such-token"])
    assert {signal.getsignal(number) for number in _watcher.IGNORED} == {signal.SIG_IGN}
    assert os.read(announced, 100) == _watcher.ARMED
    assert os.read(announced, 100) == b""  # and closed it
    os.close(announced)


def test_a_watcher_that_ends_before_it_is_armed_is_an_os_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "watcher.py"
    broken.write_text("raise SystemExit(3)\n")
    monkeypatch.setattr("dsh.lifeline._WATCHER", str(broken))
    lifeline = Lifeline()
    with pytest.raises(OSError, match=r"ended before it was armed \(exit status 3\)"):
        lifeline.start()
    assert (lifeline.watcher_pid, lifeline._fd) == (None, None)


def test_start_replaces_a_watcher_that_died_and_tells_it_every_group(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    lifeline = Lifeline()
    listed = sleeper(sleepers)
    lifeline.watch(listed.pid)
    old = lifeline.watcher_pid
    assert old is not None
    os.kill(old, signal.SIGKILL)
    await_exits([old], PATIENCE)
    lifeline.start()  # what open_process does before it starts a command
    assert lifeline.watcher_pid not in (None, old)
    end(lifeline)
    assert listed.wait(PATIENCE) == KILLED


def _ignored(pid: int) -> set[signal.Signals]:
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(
        next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16
    )
    return {number for number in _watcher.IGNORED if mask & (1 << (number - 1))}


def test_a_watcher_that_cannot_start_is_an_os_error(monkeypatch: pytest.MonkeyPatch) -> None:
    lifeline = Lifeline()
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    with pytest.raises(OSError, match=r"cannot start the lifeline watcher \(/nonexistent/"):
        lifeline.start()
    assert lifeline.watcher_pid is None


def test_the_mark_is_added_to_the_given_environment_or_this_process_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LIFELINE_TEST_VARIABLE", "1")
    lifeline = Lifeline()
    assert lifeline.mark({"A": "b", MARK: "outer"}) == {"A": "b", MARK: lifeline.token}
    assert lifeline.mark()["LIFELINE_TEST_VARIABLE"] == "1"


def test_a_forked_child_drops_the_parent_pipe_and_gets_a_lifeline_of_its_own() -> None:
    lifeline = Lifeline()
    lifeline.start()
    token, fd = lifeline.token, lifeline._fd
    assert fd is not None
    report, child_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child: coverage does not follow a bare fork)
        fresh = lifeline._fd is None and lifeline.token != token and not lifeline.groups
        try:
            os.fstat(fd)
            closed = False
        except OSError:
            closed = True
        os.write(child_end, b"yes" if fresh and closed else b"no")
        os._exit(0)
    os.close(child_end)
    assert os.read(report, 3) == b"yes"
    os.close(report)
    os.waitpid(pid, 0)
    end(lifeline)


def test_forget_resets_the_lifeline() -> None:
    lifeline = Lifeline()
    lifeline.watch(999999999)
    token, watcher = lifeline.token, lifeline._watcher
    assert watcher is not None
    lifeline._forget()  # as after a fork, in the child (the fd is closed, not the watcher)
    assert (lifeline._fd, lifeline.watcher_pid, lifeline.groups) == (None, None, frozenset())
    assert lifeline.token != token
    assert watcher.wait(PATIENCE) == 0  # here the only writer was this process
    lifeline._forget()  # nothing open: nothing to close


# -- processes started under this process's lifeline ----------------------------------------


@pytest.mark.anyio
async def test_open_process_leads_a_watched_group_and_reap_releases_it() -> None:
    # The child says when its program runs: its environment is set up by then (the
    # kernel fills /proc/<pid>/environ a moment after the exec).
    running = "import signal, sys; sys.stdout.write('up'); sys.stdout.flush(); signal.pause()"
    process = await open_process([sys.executable, "-c", running], env={"A": "b"})
    try:
        assert process.stdout is not None
        assert await process.stdout.receive() == b"up"
        assert os.getpgid(process.pid) == process.pid == os.getsid(process.pid)
        assert process.pid in LIFELINE.groups
        environ = environ_of(process.pid)
        assert f"{MARK}={LIFELINE.token}".encode() in environ
        assert b"A=b" in environ
    finally:
        process.kill()
        await reap(process)
    assert process.pid not in LIFELINE.groups


@pytest.mark.anyio
async def test_a_process_whose_group_cannot_be_listed_is_killed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mark = f"lifeline-unlisted-{os.getpid()}"

    def broken(pgid: int) -> None:
        raise OSError("no watcher")

    monkeypatch.setattr(LIFELINE, "watch", broken)
    with pytest.raises(OSError, match="no watcher"):
        await open_process(["sleep", "1000"], env={"LIFELINE_TEST_MARK": mark})
    await anyio.to_thread.run_sync(await_exits, marked(mark), PATIENCE)
    assert not marked(mark)


@pytest.mark.anyio
async def test_preexec_runs_in_the_child_after_the_new_session_and_pass_fds_stay_open() -> None:
    read, write = os.pipe()
    seen = []

    def step() -> None:  # in the child, between fork and exec
        os.write(write, f"{os.getpid()} {os.getsid(0)}".encode())

    try:
        process = await open_process(
            ["bash", "-c", f"echo passed >&{write}"],
            preexec=step,
            pass_fds=(write,),
            stdout=subprocess.DEVNULL,
        )
        try:
            assert process.pid in LIFELINE.groups
            assert await process.wait() == 0
        finally:
            await reap(process)
        os.close(write)
        write = -1
        while chunk := os.read(read, 100):
            seen.append(chunk)
    finally:
        os.close(read)
        if write != -1:
            os.close(write)
    # the step ran in the child, once it led its own session; then the command ran
    assert b"".join(seen) == f"{process.pid} {process.pid}passed\n".encode()
    assert process.pid not in LIFELINE.groups


@pytest.mark.anyio
async def test_a_preexec_that_raises_is_an_os_error() -> None:
    def step() -> None:
        raise RuntimeError("no sandbox here")

    with pytest.raises(OSError, match="the pre-exec step of 'true' failed in the child"):
        await open_process(["true"], preexec=step)


@pytest.mark.anyio
async def test_without_preexec_pass_fds_still_reach_the_child() -> None:
    read, write = os.pipe()
    try:
        process = await open_process(
            ["bash", "-c", f"echo plain >&{write}"], pass_fds=(write,), stdout=subprocess.DEVNULL
        )
        assert await process.wait() == 0
        await reap(process)
        os.close(write)
        write = -1
        assert os.read(read, 100) == b"plain\n"
    finally:
        os.close(read)
        if write != -1:
            os.close(write)
