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

__all__ = ["CoreSpecs", "counted"]


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
