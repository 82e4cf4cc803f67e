"""The project's own instructions in the system prompt: AGENTS.md and CLAUDE.md from the
agent's working directory upwards.

YAML name ``context-files``; plugin ``ContextFiles`` (needs ``system_prompt``). See this
package's README.
"""

from __future__ import annotations

from ._files import (
    FILE_NAMES,
    PREAMBLE,
    ContextFile,
    FileCache,
    StatCache,
    folders,
    render,
    stat_signature,
)
from ._plugin import SECTION, SECTION_ORDER, VARIABLE, ContextFiles, ContextFilesConfig

plugin = ContextFiles

__all__ = [
    "FILE_NAMES",
    "PREAMBLE",
    "SECTION",
    "SECTION_ORDER",
    "VARIABLE",
    "ContextFile",
    "ContextFiles",
    "ContextFilesConfig",
    "FileCache",
    "StatCache",
    "folders",
    "plugin",
    "render",
    "stat_signature",
]
