"""The errors of the fleet."""

from __future__ import annotations

from dsh import DshError

__all__ = ["FleetError", "TaskFileError"]


class FleetError(DshError, RuntimeError):
    """The fleet cannot run as asked: no session persistence, an unknown engine, an
    option the engine does not take, a worker that cannot load the deployment."""

    code = "FLEET"


class TaskFileError(DshError, ValueError):
    """A tasks file has bad lines (not JSON, a missing or malformed field, a repeated
    id, an unknown model); the message lists every problem as ``<file>:<line>: …``,
    and nothing ran."""

    code = "FLEET_TASKS"

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        #: One ``<file>:<line>: <problem>`` per bad line.
        self.problems = problems
