"""The model's file tools: ``read``, ``write``, ``edit``, ``glob`` and ``grep``.

YAML name ``tool-fs`` (injects ``tools``, ``system_prompt`` and ``fs``; asks the
``approval`` service, when present, before writes and edits). See this package's
README for the contract.
"""

from __future__ import annotations

from ._config import ToolFsConfig
from ._errors import FsAmbiguousEditError, FsEditNotFoundError
from ._guidance import SECTIONS, EditArgs, GlobArgs, GrepArgs, ReadArgs, WriteArgs
from ._plugin import FsTools, describe_change
from ._render import GLOB_LIMIT, GREP_LIMIT

plugin = FsTools

__all__ = [
    "GLOB_LIMIT",
    "GREP_LIMIT",
    "SECTIONS",
    "EditArgs",
    "FsAmbiguousEditError",
    "FsEditNotFoundError",
    "FsTools",
    "GlobArgs",
    "GrepArgs",
    "ReadArgs",
    "ToolFsConfig",
    "WriteArgs",
    "describe_change",
    "plugin",
]
