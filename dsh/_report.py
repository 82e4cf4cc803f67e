"""The report the ``deployment/check`` listeners fill in (see ``dsh._check``).

Its own module so that ``import dsh`` does not load ``dataclasses``: ``dsh.CheckReport``
is imported on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CheckReport"]


@dataclass
class CheckReport:
    """What the ``deployment/check`` listeners found.

    ``agent`` is the ``--agent`` of ``dsh check`` (None: every agent). ``passed``
    holds short phrases that end up in the success line (``prompt renders for agent
    "main" (1 tools)``); ``problems`` one line each that fails the check; ``warnings``
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
