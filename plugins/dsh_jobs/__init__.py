"""Background jobs: shell commands left running, owned by the session that started them.

YAML name ``jobs``; service ``Jobs`` at ctx key ``jobs`` (it injects the ``bash``
seam). ``tool-bash`` starts jobs (``run_in_background``); ``tool-jobs`` reads and
stops them. See this package's README.
"""

from __future__ import annotations

from ._errors import JobLimitError, JobNotFoundError
from ._job import Job
from ._service import Jobs, JobsConfig

plugin = Jobs

__all__ = ["Job", "JobLimitError", "JobNotFoundError", "Jobs", "JobsConfig", "plugin"]
