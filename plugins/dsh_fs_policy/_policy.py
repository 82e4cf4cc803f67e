"""The ``fs-policy`` plugin: a session may change only what it has read, as it read it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from dsh import Disposer, Plugin
from dsh_fs import FsNotObservedError, MutationKind, Precondition, Version, not_observed_message

__all__ = ["FsPolicyConfig", "ObservationPolicy", "Observations", "session_key"]


def session_key(call: Any) -> str | None:
    """Whose observations ``call`` uses: its agent's session id, ``None`` without one."""
    session = getattr(getattr(call, "agent", None), "session", None)
    key: str | None = getattr(session, "id", None)
    return key


class FsPolicyConfig(BaseModel):
    """Config of the ``fs-policy`` plugin: it has no settings (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


class Observations:
    """What each session last saw of each target: a version, or ``None`` for absent.

    - ``write``: a target never seen, or seen absent, must still be absent (an existing
      file fails ``FS_NOT_OBSERVED``); a target seen present must still have the version
      seen (else ``FS_STALE_VERSION``).
    - ``edit``: a target never seen fails ``FS_NOT_OBSERVED`` at once; otherwise as for
      ``write``.
    - Reads, writes and edits record what the session now knows.
    """

    def __init__(self) -> None:
        self.seen: dict[tuple[str | None, str], Version | None] = {}

    def precondition(self, kind: MutationKind, target: str, call: Any) -> Precondition:
        key = (session_key(call), target)
        if key not in self.seen:
            if kind == "edit":
                raise FsNotObservedError(not_observed_message("edit", target), target)
            return Precondition.absent()
        version = self.seen[key]
        return Precondition.absent() if version is None else Precondition.of(version)

    def observed(self, target: str, version: Version | None, call: Any) -> None:
        self.seen[(session_key(call), target)] = version

    def written(self, target: str, version: Version, call: Any) -> None:
        self.seen[(session_key(call), target)] = version


class ObservationPolicy(Plugin):
    """Sets :class:`Observations` as the ``fs`` seam's policy."""

    name = "fs-policy"
    Config = FsPolicyConfig
    inject = ("fs",)

    #: The policy set on the seam (set by :meth:`setup`).
    observations: Observations

    def setup(self) -> Disposer:
        self.observations = Observations()
        registration: Disposer = self.ctx.fs.set_policy(self.observations)
        return registration
