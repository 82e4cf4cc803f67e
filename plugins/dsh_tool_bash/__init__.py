"""The ``bash`` tool: shell commands for the model, through the ``bash`` seam.

YAML name ``tool-bash``; it injects ``tools``, ``bash`` and ``system_prompt``, uses
``jobs`` and ``approval`` when they are loaded. See this package's README.
"""

from __future__ import annotations

from ._render import render_result
from ._sandbox import LEAVE_SENTENCE, sandbox_guidance
from ._tool import (
    BACKGROUND_SENTENCE,
    DESCRIPTION,
    GUIDANCE,
    BackgroundBashArgs,
    BashArgs,
    SandboxedBackgroundBashArgs,
    SandboxedBashArgs,
    ToolBash,
    ToolBashConfig,
)

plugin = ToolBash

__all__ = [
    "BACKGROUND_SENTENCE",
    "DESCRIPTION",
    "GUIDANCE",
    "LEAVE_SENTENCE",
    "BackgroundBashArgs",
    "BashArgs",
    "SandboxedBackgroundBashArgs",
    "SandboxedBashArgs",
    "ToolBash",
    "ToolBashConfig",
    "plugin",
    "render_result",
    "sandbox_guidance",
]
