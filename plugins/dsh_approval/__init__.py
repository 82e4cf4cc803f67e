"""Approvals: whether the user lets an agent do something (run a command, write a file).

YAML name ``approval``; service ``Approval`` at ctx key ``approval``. A front-end
answers the questions (``set_responder``); tools ask through ``request`` or
``require``. See this package's README.
"""

from __future__ import annotations

from ._service import (
    ALWAYS,
    Approval,
    ApprovalConfig,
    ApprovalDeniedError,
    ApprovalError,
    ApprovalRequest,
    ApprovalSpecs,
    Responder,
)

plugin = Approval

__all__ = [
    "ALWAYS",
    "Approval",
    "ApprovalConfig",
    "ApprovalDeniedError",
    "ApprovalError",
    "ApprovalRequest",
    "ApprovalSpecs",
    "Responder",
    "plugin",
]
