"""Helpers of the llm-replay tests: replay files written from chunk lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsh_llm import Chunk, chunk_to_json


def replay_line(turn: Any, step: Any, chunks: Any) -> str:
    """One line of a replay file (without its newline). A list of chunks is written in
    the wire format; anything else (raw JSON values, bad data) is written as given."""
    if isinstance(chunks, list) and all(not isinstance(c, dict) for c in chunks):
        chunks = [chunk_to_json(c) for c in chunks]
    return json.dumps({"turn": turn, "step": step, "chunks": chunks})


def replay_text(*streams: tuple[int, int, list[Chunk]]) -> str:
    """A replay file recording each ``(turn, step, chunks)`` stream on a line."""
    return "".join(replay_line(turn, step, chunks) + "\n" for turn, step, chunks in streams)


def write_replay(path: Path, *streams: tuple[int, int, list[Chunk]]) -> Path:
    """Write :func:`replay_text` of ``streams`` to ``path`` and return it."""
    path.write_text(replay_text(*streams), encoding="utf-8")
    return path
