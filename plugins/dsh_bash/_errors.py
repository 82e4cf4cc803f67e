"""Errors of the bash seam and of the executors behind it."""

from __future__ import annotations

from dsh import DshError

__all__ = ["BashArgumentError", "BashError", "BashSpawnError", "BashUnavailableError"]


class BashError(DshError, RuntimeError):
    """The seam was misused: a second executor, or something that is not an executor."""

    code = "BASH"


class BashArgumentError(DshError, ValueError):
    """A request cannot run as given: a blank command, a negative timeout, or one over
    the executor's maximum (the tool result code ``INVALID_ARGS``)."""

    code = "INVALID_ARGS"


class BashUnavailableError(DshError, RuntimeError):
    """No executor is set (load ``bash-local`` next to ``bash``), or the executor went
    away while the command ran."""

    code = "BASH_NO_EXECUTOR"


class BashSpawnError(DshError, OSError):
    """The shell could not start: its working directory does not exist, or the shell
    program cannot be run."""

    code = "BASH_SPAWN_FAILED"
