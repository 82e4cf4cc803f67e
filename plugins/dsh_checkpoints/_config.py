"""Config of the ``checkpoints`` plugin."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_STORE", "CheckpointsConfig"]

#: Where the store lives by default, relative to the workspace root (the session cwd).
DEFAULT_STORE = ".dsh/checkpoints"


class CheckpointsConfig(BaseModel):
    """Config of the ``checkpoints`` plugin (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    #: The store's directory (blobs, shadow repository); a relative path is taken from
    #: the workspace root, the calling session's cwd (else the process cwd).
    store: str = Field(default=DEFAULT_STORE, min_length=1)
    #: Snapshot the workspace into the shadow git repository before each bash call.
    snapshot_bash: bool = False
    #: The store's bound: past it, the oldest blobs no recent turn references go.
    max_bytes: int = Field(default=1 << 30, gt=0)
    #: How many of each live session's latest turns keep their blobs through a
    #: collection.
    keep_turns: int = Field(default=50, ge=1)
