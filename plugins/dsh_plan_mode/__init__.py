"""Plan mode (YAML name ``plan-mode``, service ``plan_mode``): ``/plan`` limits an agent
to read-only tools until the user approves its plan (``exit_plan_mode``). See this
package's README.
"""

from __future__ import annotations

from ._plugin import (
    EXIT_TOOL,
    READ_ONLY_TOOLS,
    SECTION,
    SECTION_TEXT,
    ExitPlanArgs,
    PlanMode,
    PlanModeConfig,
    PlanModeError,
    PlanModeSpecs,
)

plugin = PlanMode

__all__ = [
    "EXIT_TOOL",
    "READ_ONLY_TOOLS",
    "SECTION",
    "SECTION_TEXT",
    "ExitPlanArgs",
    "PlanMode",
    "PlanModeConfig",
    "PlanModeError",
    "PlanModeSpecs",
    "plugin",
]
