"""``dsh check``: what plugins verify about a loaded deployment without calling a model.

Loading a deployment already validates every config and starts every plugin. What only
a plugin knows (that each agent's prompt renders, that a model is served) it checks in
a listener of the core's ``deployment/check`` event, which ``dsh check`` dispatches
serially with one :class:`CheckReport` after the deployment has loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ._events import hookspec

__all__ = ["CheckReport", "CoreSpecs", "counted"]


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``count`` and the noun that agrees with it: ``counted(1, "plugin entry",
    "plugin entries")`` is ``"1 plugin entry"``, ``counted(2, "tool")`` is ``"2 tools"``
    (``plural`` defaults to ``singular + "s"``)."""
    noun = singular if count == 1 else plural or f"{singular}s"
    return f"{count} {noun}"


class CoreSpecs:
    """The events the core itself owns (declared on every runtime)."""

    @hookspec
    def deployment_check(self, report: CheckReport) -> None:
        """Serial, after ``dsh check`` loaded the deployment: verify what this plugin
        owns and record it in ``report``. A listener that raises is reported as a
        problem naming the listener."""


@dataclass
class CheckReport:
    """What the ``deployment/check`` listeners found.

    ``agent`` is the ``--agent`` of ``dsh check`` (None: every agent). ``passed``
    holds short phrases that end up in the success line (``prompt renders for agent
    "main" (1 tool)``); ``problems`` one line each that fails the check; ``warnings``
    lines printed without failing it.
    """

    path: Path
    agent: str | None = None
    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def ok(self, phrase: str) -> None:
        """Record something verified (a phrase of the success line)."""
        self.passed.append(phrase)

    def fail(self, line: str) -> None:
        """Record a problem: the check fails."""
        self.problems.append(line)

    def warn(self, line: str) -> None:
        """Record something worth a look that does not fail the check."""
        self.warnings.append(line)
