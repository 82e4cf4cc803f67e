"""A model that replays recorded chunk streams, indexed by turn and step.

YAML name ``llm-replay``; plugin ``LlmReplay`` (needs the ``llm`` service). See this
package's README for the JSONL format and :func:`record_session` to capture a run.
"""

from __future__ import annotations

from ._replay import (
    LlmReplay,
    LlmReplayConfig,
    Recordings,
    ReplayAdapter,
    ReplayFileError,
    parse_replay,
    record_session,
    resolve_replay_path,
)

plugin = LlmReplay

__all__ = [
    "LlmReplay",
    "LlmReplayConfig",
    "Recordings",
    "ReplayAdapter",
    "ReplayFileError",
    "parse_replay",
    "plugin",
    "record_session",
    "resolve_replay_path",
]
