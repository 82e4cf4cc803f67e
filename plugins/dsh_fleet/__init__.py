"""The fleet: many sessions, one per task, run at least once by an engine, with the
session log as the only record.

YAML name ``fleet``; service ``Fleet`` at ctx key ``fleet``; command ``dsh fleet``.
See the README.
"""

from __future__ import annotations

from ._engine import (
    Engine,
    EngineFactory,
    EngineOptions,
    Job,
    LocalEngine,
    ResultCallback,
    TaskResult,
    run_bounded,
)
from ._errors import FleetError, TaskFileError
from ._service import (
    ATTEMPT_EVENT,
    FINISHED,
    RESUME_PROMPT,
    STATES,
    Fleet,
    FleetConfig,
    TaskStatus,
    result_of,
    state_of,
    usage_of,
)
from ._tasks import TASK_KEYS, Task, read_tasks, session_id_for

plugin = Fleet

__all__ = [
    "ATTEMPT_EVENT",
    "FINISHED",
    "RESUME_PROMPT",
    "STATES",
    "TASK_KEYS",
    "Engine",
    "EngineFactory",
    "EngineOptions",
    "Fleet",
    "FleetConfig",
    "FleetError",
    "Job",
    "LocalEngine",
    "ResultCallback",
    "Task",
    "TaskFileError",
    "TaskResult",
    "TaskStatus",
    "plugin",
    "read_tasks",
    "result_of",
    "run_bounded",
    "session_id_for",
    "state_of",
    "usage_of",
]
