"""The fs-policy tests' fixture: ``ws``, the workspace layout of ``fs_support``."""

from __future__ import annotations

from tests.plugins.fs.fs_support import ws

__all__ = ["ws"]
