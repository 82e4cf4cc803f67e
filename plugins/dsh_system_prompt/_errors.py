"""Errors raised by the system prompt plugin.

Each class carries a stable ``code`` and also derives from the builtin a caller would
naturally catch (``ValueError`` for bad content, ``TypeError`` for a bad order value).
"""

from __future__ import annotations

from dsh import DshError, DuplicateNameError

__all__ = [
    "DuplicatePromptNameError",
    "PromptRegistrationError",
    "PromptRenderError",
    "PromptTypeError",
    "SectionOrderError",
    "ToolOrderError",
]


class PromptRenderError(DshError, ValueError):
    """A section could not be interpolated: a malformed, unknown or valueless reference."""

    code = "PROMPT_RENDER"


class ToolOrderError(DshError, ValueError):
    """The ``tool_order`` config is invalid, or the collected tools contradict it."""

    code = "TOOL_ORDER"


class PromptRegistrationError(DshError, ValueError):
    """A section or variable name is unusable or already taken in its layer."""

    code = "PROMPT_REGISTRATION"


class DuplicatePromptNameError(PromptRegistrationError, DuplicateNameError):
    """A section or variable name is already registered in that layer (by ``holder``)."""


class SectionOrderError(DshError, TypeError):
    """A prompt section was given an ``order`` that is not a finite number."""

    code = "PROMPT_SECTION_ORDER"


class PromptTypeError(DshError, TypeError):
    """A registration was given a value of the wrong type (a non-callable provider,
    a section name or text that is neither a string nor, for text, a callable)."""

    code = "PROMPT_TYPE"
