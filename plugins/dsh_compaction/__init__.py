"""Compaction: the older history summarised into a checkpoint when the context fills up.

YAML name ``compaction``; service ``Compaction`` at ctx key ``compaction``. See the README.
"""

from __future__ import annotations

from ._history import (
    CHECKPOINT_EVENT,
    PREAMBLE,
    History,
    Plan,
    message_chars,
    prompt_tokens,
    prune,
    summary_message,
)
from ._plugin import INSTRUCTION, NOTHING_TO_COMPACT, Compaction, CompactionConfig, describe

plugin = Compaction

__all__ = [
    "CHECKPOINT_EVENT",
    "INSTRUCTION",
    "NOTHING_TO_COMPACT",
    "PREAMBLE",
    "Compaction",
    "CompactionConfig",
    "History",
    "Plan",
    "describe",
    "message_chars",
    "plugin",
    "prompt_tokens",
    "prune",
    "summary_message",
]
