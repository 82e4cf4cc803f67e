"""``dsh check``: what plugins verify about a loaded deployment without calling a model.

Loading a deployment already validates every config and starts every plugin. What only
a plugin knows (that each agent's prompt renders, that a model is served) it checks in
a listener of the core's ``deployment/check`` event, which ``dsh check`` dispatches
serially with one :class:`~dsh.CheckReport` (``dsh._report``) after the deployment has
loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._events import hookspec

if TYPE_CHECKING:
    from ._report import CheckReport

__all__ = ["CoreSpecs"]


class CoreSpecs:
    """The events the core itself owns (declared on every runtime)."""

    @hookspec
    def deployment_check(self, report: CheckReport) -> None:
        """Serial, after ``dsh check`` loaded the deployment: verify what this plugin
        owns and record it in ``report``. A listener that raises is reported as a
        problem naming the listener."""
