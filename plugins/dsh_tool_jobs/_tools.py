"""The ``tool-jobs`` plugin: ``job_output``, ``job_list`` and ``job_kill``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from dsh import Disposer, Plugin
from dsh_bash import OutputSlice, join_parts
from dsh_jobs import Job
from dsh_system_prompt import PromptSection
from dsh_tools import Tool, ToolArgumentsError, ToolCall

__all__ = [
    "GUIDANCE",
    "MAX_WAIT_MS",
    "JobIdArgs",
    "JobOutputArgs",
    "NoArgs",
    "ToolJobs",
    "ToolJobsConfig",
]

#: The longest ``job_output`` may wait.
MAX_WAIT_MS = 600_000

GUIDANCE = (
    "Background jobs: note the id of every job you start. Do not poll a job in a loop: "
    "call job_output with wait=true, which returns when the job ends or the timeout "
    "passes. Before you give your final answer, collect the output of the jobs you still "
    "need and kill the ones you no longer need."
)


class JobOutputArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(description="The id `bash` gave when it started the job.")
    wait: bool = Field(default=True, description="Wait until the job ends (or the timeout passes).")
    timeout_ms: int = Field(
        default=30_000, description="How long to wait at most, in milliseconds."
    )


class JobIdArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(description="The id `bash` gave when it started the job.")


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolJobsConfig(BaseModel):
    """Config of ``tool-jobs``: it has no settings (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


class ToolJobs(Plugin):
    """Registers the job tools and the ``tool:jobs`` section (order 106)."""

    name = "tool-jobs"
    Config = ToolJobsConfig
    inject = ("tools", "jobs", "system_prompt")

    def setup(self) -> Iterator[Disposer]:
        ctx = self.ctx
        yield ctx.system_prompt.section(PromptSection(name="tool:jobs", order=106, text=GUIDANCE))
        tools: tuple[Tool[Any], ...] = (
            Tool(
                "job_output",
                "Read what a background job wrote since the last read of it. With "
                "`wait` (the default) it first waits until the job ends or "
                "`timeout_ms` passes. The reply ends with the job's status: "
                "`[status: running]`, `[status: exited N]` or `[status: killed SIGNAL]`.",
                JobOutputArgs,
                self.job_output,
            ),
            Tool(
                "job_list",
                "List the background jobs of this session, one `<id> [<status>] "
                "<command>` line each.",
                NoArgs,
                self.job_list,
            ),
            Tool(
                "job_kill",
                "Stop a background job: SIGTERM to its processes, SIGKILL if they do not end soon.",
                JobIdArgs,
                self.job_kill,
            ),
        )
        for tool in tools:
            yield ctx.tools.register(tool)

    async def job_output(self, args: JobOutputArgs, call: ToolCall) -> str:
        timeout = args.timeout_ms
        if timeout < 0:
            raise ToolArgumentsError(
                f"invalid timeout_ms: expected 0 or more milliseconds, got {timeout}"
            )
        if timeout > MAX_WAIT_MS:
            raise ToolArgumentsError(f"invalid timeout_ms: at most {MAX_WAIT_MS}")
        job = self.ctx.jobs.get(args.job_id, agent=call.agent)
        if args.wait:
            with anyio.move_on_after(timeout / 1000):
                await job.wait()
        out, err = job.read_new()
        parts = [*_stream(out, "output", _spill(job, "stdout"))]
        errors = list(_stream(err, "stderr", _spill(job, "stderr")))
        if errors:
            parts.append("[stderr]\n" + join_parts(errors))
        if not parts:
            parts.append("(no new output)")
        parts.append(f"[status: {job.status}]")
        return join_parts(parts)

    async def job_list(self, args: NoArgs, call: ToolCall) -> str:
        jobs = self.ctx.jobs.list(agent=call.agent)
        if not jobs:
            return "(no jobs)"
        return "\n".join(f"{job.id} [{job.status}] {' '.join(job.command.split())}" for job in jobs)

    async def job_kill(self, args: JobIdArgs, call: ToolCall) -> str:
        jobs = self.ctx.jobs
        job = jobs.get(args.job_id, agent=call.agent)
        if await jobs.kill(job):
            return f"killed job {job.id}"
        return f"job {job.id} already finished"


def _spill(job: Job, stream: str) -> str:
    run = job.run
    assert run is not None
    path = run.stdout.spill_path if stream == "stdout" else run.stderr.spill_path
    return path or "(unavailable)"


def _stream(read: OutputSlice, what: str, spill: str) -> Iterator[str]:
    if read.skipped:
        yield f"[{read.skipped} bytes of earlier {what} skipped; full {what}: {spill}]"
    if read.text:
        yield read.text
