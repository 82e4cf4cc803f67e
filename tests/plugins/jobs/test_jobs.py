"""Background jobs and their tools: incremental output, status words, kill, session
ownership, the running cap, and jobs dying with their agent or the service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh import ConfigError, Context, Disposer, Plugin
from dsh.testing import capture_logs, run_turn, tool_call, tool_calls, until
from dsh_bash import (
    Bash,
    BashRequest,
    BashResult,
    BashRun,
    BashSpawnError,
    SpillFolder,
    StreamCapture,
)
from dsh_jobs import Job, JobLimitError, JobNotFoundError, Jobs
from dsh_tool_bash import ToolBash
from dsh_tool_jobs import GUIDANCE, ToolJobs
from dsh_tools import ToolCall, ToolResult
from tests.plugins.bash.bash_support import (
    agent_shell,
    dies,
    main_agent,
    make_fifo,
    read_fifo,
    read_pid,
    tool_runtime,
)
from tests.support import event_data

pytestmark = pytest.mark.anyio

JOB_PLUGINS = ((Jobs, None), (ToolBash, None), (ToolJobs, None))


async def call(root: Context, name: str, agent: Any = None, **arguments: Any) -> ToolResult:
    """One tool call, as ``agent`` (None: no agent)."""
    done: ToolResult = await root.tools.execute(name, arguments, ToolCall("c", agent=agent))
    return done


async def with_jobs(root: Context, **config: Any) -> None:
    await root.plugin(Jobs, config or None)
    await root.plugin(ToolBash)
    await root.plugin(ToolJobs)


async def write_fifo(path: Path, data: str) -> None:
    """Write ``data`` to the FIFO ``path`` once a command opens it for reading."""

    def write() -> None:
        with path.open("w") as fifo:
            fifo.write(data)

    await anyio.to_thread.run_sync(write)


async def wrote(job: Job, stdout: int, stderr: int = 0) -> None:
    """Wait until the job's captures hold ``stdout`` and ``stderr`` bytes (the data is
    in the pipes already; the pumps need a few turns of the event loop)."""
    run = job.run
    assert run is not None
    await until(lambda: run.stdout.size >= stdout and run.stderr.size >= stderr)


# -- output and status -----------------------------------------------------------------------


async def test_a_job_runs_and_its_output_is_read_incrementally(tmp_path: Path) -> None:
    ready, go = make_fifo(tmp_path, "ready"), make_fifo(tmp_path, "go")
    command = f"echo first; echo oops >&2; echo > {ready}; read line < {go}; echo second; exit 3"
    async with tool_runtime() as root:
        await with_jobs(root)
        started = await call(root, "bash", command=command, run_in_background=True)
        assert (started.content, started.is_error) == ("started background job j1", False)
        await read_fifo(ready)
        job = root.jobs.get("j1")
        await wrote(job, 6, 5)
        early = await call(root, "job_output", job_id="j1", wait=False)
        assert early.content == "first\n[stderr]\noops\n[status: running]"
        again = await call(root, "job_output", job_id="j1", wait=False)
        assert again.content == "(no new output)\n[status: running]"
        waited = await call(root, "job_output", job_id="j1", timeout_ms=1)
        assert waited.content == "(no new output)\n[status: running]"
        async with anyio.create_task_group() as tg:
            tg.start_soon(write_fifo, go, "go\n")
            done = await call(root, "job_output", job_id="j1")
        assert done.content == "second\n[status: exited 3]"
        listed = await call(root, "job_list")
        assert listed.content == f"j1 [exited 3] {' '.join(command.split())}"
        killed = await call(root, "job_kill", job_id="j1")
        assert killed.content == "job j1 already finished"


async def test_a_job_has_no_timeout() -> None:
    async with tool_runtime(default_timeout_ms=50) as root:
        await with_jobs(root)
        await call(root, "bash", command="sleep 0.3; echo late", run_in_background=True)
        done = await call(root, "job_output", job_id="j1")
    assert done.content == "late\n[status: exited 0]"


async def test_killing_a_job_kills_its_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    ready = make_fifo(tmp_path)
    command = f"sleep 100 & echo $! > {pid_file}; echo > {ready}; wait"
    async with tool_runtime(kill_grace_ms=200) as root:
        await with_jobs(root)
        await call(root, "bash", command=command, run_in_background=True)
        await read_fifo(ready)
        killed = await call(root, "job_kill", job_id="j1")
        assert killed.content == "killed job j1"
        status = await call(root, "job_output", job_id="j1")
        assert status.content == "(no new output)\n[status: killed SIGTERM]"
        assert (await call(root, "job_list")).content.startswith("j1 [killed SIGTERM] sleep 100")
    await dies(read_pid(pid_file))


async def test_a_read_that_lost_output_says_where_all_of_it_is() -> None:
    command = "head -c 50 /dev/zero | tr '\\0' a; printf END; head -c 30 /dev/zero | tr '\\0' b >&2"
    async with tool_runtime(max_output_bytes=10) as root:
        await with_jobs(root)
        await call(root, "bash", command=command, run_in_background=True)
        job = root.jobs.get("j1")
        done = await call(root, "job_output", job_id="j1")
        run = job.run
        assert run is not None
        out_path, err_path = run.stdout.spill_path, run.stderr.spill_path
    assert done.content == (
        f"[43 bytes of earlier output skipped; full output: {out_path}]\naaaaaaaEND\n"
        f"[stderr]\n[20 bytes of earlier stderr skipped; full stderr: {err_path}]\n"
        "bbbbbbbbbb\n[status: exited 0]"
    )


async def test_a_lost_read_without_a_spill_file_says_so() -> None:
    async with tool_runtime(max_output_bytes=4, spill_max_bytes=0) as root:
        await with_jobs(root)
        await call(root, "bash", command="printf 0123456789 >&2", run_in_background=True)
        done = await call(root, "job_output", job_id="j1")
    assert done.content == (
        "[stderr]\n[6 bytes of earlier stderr skipped; full stderr: (unavailable)]\n"
        "6789\n[status: exited 0]"
    )


@pytest.mark.parametrize(
    ("wait_ms", "message"),
    [
        (-1, "Error: invalid timeout_ms: expected 0 or more milliseconds, got -1"),
        (600_001, "Error: invalid timeout_ms: at most 600000"),
    ],
)
async def test_job_output_timeouts_are_checked(wait_ms: int, message: str) -> None:
    async with tool_runtime() as root:
        await with_jobs(root)
        done = await call(root, "job_output", job_id="j1", timeout_ms=wait_ms)
    assert (done.content, done.code) == (message, "INVALID_ARGS")


# -- ownership -------------------------------------------------------------------------------


async def test_unknown_ids_and_other_sessions_jobs_are_not_found() -> None:
    core = {"agents": [{"id": "a"}, {"id": "b"}]}
    async with agent_shell(core=core, plugins=JOB_PLUGINS) as (root, _):
        a, b = root.agents.get("a"), root.agents.get("b")
        started = await call(root, "bash", agent=a, command="sleep 100", run_in_background=True)
        assert started.content == "started background job j1"
        for name in ("job_output", "job_kill"):
            theirs = await call(root, name, agent=b, job_id="j1")
            assert (theirs.content, theirs.is_error, theirs.code) == (
                'Error: no background job "j1" in this session',
                True,
                "JOB_NOT_FOUND",
            )
            unknown = await call(root, name, agent=a, job_id="j9")
            assert unknown.code == "JOB_NOT_FOUND"
        assert (await call(root, "job_list", agent=b)).content == "(no jobs)"
        assert (await call(root, "job_list", agent=a)).content == "j1 [running] sleep 100"
        assert (await call(root, "job_list")).content == "(no jobs)"
        with pytest.raises(JobNotFoundError):
            root.jobs.get("j1")


async def test_jobs_are_killed_when_their_agent_is_disposed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    ready = make_fifo(tmp_path)
    command = f"sleep 100 & echo $! > {pid_file}; echo > {ready}; wait"
    calls = tool_calls(tool_call("bash", {"command": command, "run_in_background": True}))
    async with agent_shell(calls, "started", plugins=JOB_PLUGINS, kill_grace_ms=200) as (
        root,
        _,
    ):
        agent = main_agent(root)
        assert await run_turn(agent, "start it") == {"kind": "completed"}
        (started,) = event_data(agent.session, "tool/result")
        assert started["content"] == "started background job j1"
        await read_fifo(ready)
        job = root.jobs._jobs["j1"]
        assert job.run is not None
        shell_pid = job.run.pid
        await agent.dispose()
        assert job.status == "killed SIGTERM"
        assert root.jobs._jobs == {}
        await dies(shell_pid)
        await dies(read_pid(pid_file))


async def test_a_finished_job_is_forgotten_with_its_agent() -> None:
    async with agent_shell(plugins=JOB_PLUGINS) as (root, _):
        agent = main_agent(root)
        job = await root.jobs.start(BashRequest("true"), agent=agent)
        await job.wait()
        await agent.dispose()
        assert root.jobs._jobs == {}


async def test_unloading_the_jobs_service_kills_every_job(tmp_path: Path) -> None:
    async with tool_runtime(kill_grace_ms=200) as root:
        jobs = await root.plugin(Jobs)
        job = await root.jobs.start(BashRequest("exec sleep 100"))
        assert repr(job) == "<Job j1 [running] 'exec sleep 100'>"
        assert job.run is not None
        await jobs.dispose()
        assert job.status == "killed SIGTERM"
        await dies(job.run.pid)


async def test_unloading_the_executor_kills_the_jobs() -> None:
    async with tool_runtime(kill_grace_ms=200) as root:
        await root.plugin(Jobs)
        job = await root.jobs.start(BashRequest("exec sleep 100"))
        executor = root.bash.executor
        await executor.stop_all()
        await job.wait()
        assert job.status == "killed SIGTERM"
        assert isinstance(job.error, Exception)


# -- limits and failures ---------------------------------------------------------------------


async def test_the_running_cap() -> None:
    async with tool_runtime() as root:
        await with_jobs(root, max_running=1)
        await call(root, "bash", command="sleep 100", run_in_background=True)
        refused = await call(root, "bash", command="sleep 100", run_in_background=True)
        assert (refused.is_error, refused.code) == (True, "JOB_LIMIT")
        assert refused.content == (
            "Error: 1 background jobs are running, the most the jobs config (max_running) "
            "allows: wait for one to finish or kill one"
        )
        assert root.jobs.running == 1
        await call(root, "job_kill", job_id="j1")
        again = await call(root, "bash", command="true", run_in_background=True)
        assert again.content == "started background job j2"
        await root.jobs.get("j2").wait()
        await root.jobs.start(BashRequest("sleep 100"))
        with pytest.raises(JobLimitError):
            await root.jobs.start(BashRequest("sleep 100"))


async def test_a_job_that_cannot_start_is_an_error_and_is_not_kept(tmp_path: Path) -> None:
    core = {"agents": [{"id": "main", "cwd": str(tmp_path / "gone")}]}
    async with agent_shell(core=core, plugins=JOB_PLUGINS) as (root, _):
        agent = main_agent(root)
        before = len(agent.ctx.fiber._effects)
        done = await call(root, "bash", agent=agent, command="true", run_in_background=True)
        assert (done.is_error, done.code) == (True, "BASH_SPAWN_FAILED")
        assert root.jobs._jobs == {}
        assert len(agent.ctx.fiber._effects) == before
        with pytest.raises(BashSpawnError):
            await root.jobs.start(BashRequest("true", cwd=str(tmp_path / "gone")))
        assert root.jobs._jobs == {}


class FailingExecutor:
    """Starts (calls on_start), then raises: an executor bug."""

    max_timeout_ms = 1000

    async def run(self, request: BashRequest) -> BashResult:
        def capture(name: str) -> StreamCapture:
            return StreamCapture(name, max_bytes=10, spill_max_bytes=0, folder=SpillFolder())

        assert request.on_start is not None
        request.on_start(BashRun(0, capture("stdout"), capture("stderr")))
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("the executor broke")


async def test_an_executor_that_fails_after_the_start_leaves_a_failed_job() -> None:
    class Broken(Plugin):
        inject = ("bash",)

        def setup(self) -> Disposer:
            stop: Disposer = self.ctx.bash.set_executor(FailingExecutor())
            return stop

    async with Context() as root:
        await root.plugin(Bash)
        await root.plugin(Broken)
        await root.plugin(Jobs)
        with capture_logs("dsh.jobs") as logs:
            job = await root.jobs.start(BashRequest("anything"))
            await job.wait()
        assert job.status == "failed"
        assert "background job j1 failed" in logs.messages()
        assert job.read_new()[0].text == ""


# -- the plugin ------------------------------------------------------------------------------


async def test_mounting_and_disposing_restores_the_registries() -> None:
    async with tool_runtime() as root:
        tools_before = dict(root.tools._global.tools)
        sections_before = dict(root.system_prompt._global.sections)
        jobs = await root.plugin(Jobs)
        tool = await root.plugin(ToolJobs)
        assembly = await root.system_prompt.assemble()
        assert [t.name for t in assembly.tools] == ["job_kill", "job_list", "job_output"]
        assert [(s.name, s.order, s.text) for s in assembly.sections if s.name == "tool:jobs"] == [
            ("tool:jobs", 106, GUIDANCE)
        ]
        assert all("description" not in t.parameters for t in assembly.tools)
        await tool.dispose()
        await jobs.dispose()
        assert root.tools._global.tools == tools_before
        assert root.system_prompt._global.sections == sections_before
        assert root.get("jobs") is None


async def test_bad_configs() -> None:
    async with tool_runtime() as root:
        with pytest.raises(ConfigError, match=r"greater than or equal to 1 \(at max_running\)"):
            await root.plugin(Jobs, {"max_running": 0})
        await root.plugin(Jobs)
        with pytest.raises(ConfigError, match=r"Extra inputs are not permitted \(at wait\)"):
            await root.plugin(ToolJobs, {"wait": True})
        assert root.tools._global.tools == {}
