"""The system prompt: ordered sections, tool-schema providers and strict variables.

YAML name ``system-prompt``; service ``SystemPrompt`` at ctx key ``system_prompt``.
See this package's README for the contract.
"""

from __future__ import annotations

from ._cache import read_tools
from ._errors import (
    DuplicatePromptNameError,
    PromptRegistrationError,
    PromptRenderError,
    PromptTypeError,
    SectionOrderError,
    ToolOrderError,
)
from ._render import render_prompt
from ._service import HARNESS_IDENTITY, SystemPrompt, SystemPromptConfig, SystemPromptSpecs
from ._types import (
    TOOL_ORDER_REST,
    VARIABLE_NAME,
    AssembleContext,
    AssembledSection,
    PromptAssembly,
    PromptSection,
    TextFn,
    ToolProvider,
    ToolProviderResult,
    ToolSchema,
    VariableProvider,
)

plugin = SystemPrompt

__all__ = [
    "HARNESS_IDENTITY",
    "TOOL_ORDER_REST",
    "VARIABLE_NAME",
    "AssembleContext",
    "AssembledSection",
    "DuplicatePromptNameError",
    "PromptAssembly",
    "PromptRegistrationError",
    "PromptRenderError",
    "PromptSection",
    "PromptTypeError",
    "SectionOrderError",
    "SystemPrompt",
    "SystemPromptConfig",
    "SystemPromptSpecs",
    "TextFn",
    "ToolOrderError",
    "ToolProvider",
    "ToolProviderResult",
    "ToolSchema",
    "VariableProvider",
    "plugin",
    "read_tools",
    "render_prompt",
]
