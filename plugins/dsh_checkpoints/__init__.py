"""Checkpoints, undo and rewind: each fs mutation's previous bytes in a content-addressed
store, workspace snapshots before bash calls, ``/undo`` and ``/rewind``.

YAML name ``checkpoints``; service ``Checkpoints`` at ctx key ``checkpoints``. It injects
``sessions`` and ``fs`` (``bash``, ``slash_commands`` and ``agents`` when present). See
the README.
"""

from __future__ import annotations

from ._blobs import BlobStore, Collected, write_atomic
from ._config import DEFAULT_STORE, CheckpointsConfig
from ._errors import (
    CheckpointBlobError,
    CheckpointConflictError,
    CheckpointError,
    CheckpointSnapshotError,
)
from ._history import FILE_EVENT, RESTORE_EVENT, TREE_EVENT, TurnSummary
from ._service import Checkpoints, Restored, Rewound
from ._shadow import SNAPSHOT_REF, ShadowRepo
from ._slash import describe_restore

plugin = Checkpoints

__all__ = [
    "DEFAULT_STORE",
    "FILE_EVENT",
    "RESTORE_EVENT",
    "SNAPSHOT_REF",
    "TREE_EVENT",
    "BlobStore",
    "CheckpointBlobError",
    "CheckpointConflictError",
    "CheckpointError",
    "CheckpointSnapshotError",
    "Checkpoints",
    "CheckpointsConfig",
    "Collected",
    "Restored",
    "Rewound",
    "ShadowRepo",
    "TurnSummary",
    "describe_restore",
    "plugin",
    "write_atomic",
]
