"""The errors of the checkpoint store, undo and rewind."""

from __future__ import annotations

from collections.abc import Sequence

from dsh import DshError

__all__ = [
    "CheckpointBlobError",
    "CheckpointConflictError",
    "CheckpointError",
    "CheckpointSnapshotError",
]


class CheckpointError(DshError, ValueError):
    """An undo or rewind that cannot be done: nothing to undo, an unknown turn, no
    session to act on."""

    code = "CHECKPOINT"


class CheckpointConflictError(CheckpointError):
    """Files changed since the checkpoint (by anyone): ``paths`` lists them; nothing was
    restored (``force`` overwrites them)."""

    code = "CHECKPOINT_CONFLICT"

    def __init__(self, message: str, paths: Sequence[str]) -> None:
        super().__init__(message)
        self.paths = tuple(paths)


class CheckpointBlobError(CheckpointError):
    """A checkpointed content is missing from the store (collected) or damaged."""

    code = "CHECKPOINT_BLOB"


class CheckpointSnapshotError(DshError, RuntimeError):
    """The shadow git repository could not snapshot the workspace (``snapshot_bash``)."""

    code = "CHECKPOINT_SNAPSHOT"
