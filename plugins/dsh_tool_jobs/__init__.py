"""Tools over the background jobs: ``job_output``, ``job_list`` and ``job_kill``.

YAML name ``tool-jobs``; it injects ``tools``, ``jobs`` and ``system_prompt``. Jobs are
started by ``tool-bash`` (``run_in_background``). See this package's README.
"""

from __future__ import annotations

from ._tools import (
    GUIDANCE,
    MAX_WAIT_MS,
    JobIdArgs,
    JobOutputArgs,
    NoArgs,
    ToolJobs,
    ToolJobsConfig,
)

plugin = ToolJobs

__all__ = [
    "GUIDANCE",
    "MAX_WAIT_MS",
    "JobIdArgs",
    "JobOutputArgs",
    "NoArgs",
    "ToolJobs",
    "ToolJobsConfig",
    "plugin",
]
