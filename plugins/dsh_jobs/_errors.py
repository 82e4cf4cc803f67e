"""Errors of the jobs service."""

from __future__ import annotations

from dsh import DshError

__all__ = ["JobLimitError", "JobNotFoundError"]


class JobNotFoundError(DshError, LookupError):
    """No job of that id belongs to the caller's session (unknown, or another
    session's)."""

    code = "JOB_NOT_FOUND"


class JobLimitError(DshError, RuntimeError):
    """As many background jobs are running as the ``jobs`` config allows."""

    code = "JOB_LIMIT"
