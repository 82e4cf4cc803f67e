"""A terminal chat with one agent: a REPL, or one-shot with ``-p``.

YAML name ``stdio-agent``; service ``StdioAgent`` at ctx key ``frontend``. It never
starts interacting on load: ``dsh run`` calls ``await ctx.frontend.run(...)``.
See this package's README for the contract.
"""

from __future__ import annotations

from ._report import CHECKS, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, checklist, exit_status
from ._service import StdioAgent, StdioAgentConfig, StdioAgentError
from ._stdin import read_stdin_key, read_stdin_line

plugin = StdioAgent

__all__ = [
    "CHECKS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "StdioAgent",
    "StdioAgentConfig",
    "StdioAgentError",
    "checklist",
    "exit_status",
    "plugin",
    "read_stdin_key",
    "read_stdin_line",
]
