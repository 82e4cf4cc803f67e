"""Replaying recorded chunk streams as a model, and recording them from a session."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import anyio
import anyio.lowlevel
from pydantic import BaseModel, ConfigDict, Field

from dsh import Disposer, DshError, Plugin
from dsh_llm import (
    AssemblyError,
    BlockAssembler,
    Chunk,
    Finish,
    LlmFailure,
    LlmFormatError,
    LlmRequest,
    chunk_from_json,
    chunk_to_json,
)

if TYPE_CHECKING:
    from dsh_session import Session

__all__ = [
    "LlmReplay",
    "LlmReplayConfig",
    "Recordings",
    "ReplayAdapter",
    "ReplayFileError",
    "parse_replay",
    "record_session",
    "resolve_replay_path",
]

#: Recorded streams by ``(turn, step)``.
Recordings: TypeAlias = Mapping[tuple[int, int], Sequence[Chunk]]

_KEYS = ("turn", "step", "chunks")


class ReplayFileError(DshError, ValueError):
    """A replay file cannot be read or is malformed; ``problems`` has one entry per
    bad line, each starting with ``<file>:<line>:``."""

    code = "REPLAY_FILE"

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: list[str] = list(problems)


class LlmReplayConfig(BaseModel):
    """Config of the ``llm-replay`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: The JSONL recording; a relative path is resolved against the deployment file's
    #: directory (when loaded from YAML), else against the current directory.
    file: str = Field(min_length=1)
    #: The model names served.
    models: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=lambda: ["replay"], min_length=1
    )


# -- the file format ----------------------------------------------------------------------


class _BadLine(Exception):
    """What is wrong with one line (the caller adds ``file:line``)."""


def _describe(value: object) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return json.dumps(value)


def _parse_line(line: str) -> tuple[tuple[int, int], tuple[Chunk, ...]]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _BadLine(f"bad JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise _BadLine(
            f'expected a JSON object {{"turn", "step", "chunks"}}, got {_describe(data)}'
        )
    problems = [f'missing key "{key}"' for key in _KEYS if key not in data]
    problems += [f'unknown key "{key}"' for key in data if key not in _KEYS]
    problems += [
        f'"{key}" must be a positive integer, got {_describe(data[key])}'
        for key in ("turn", "step")
        if key in data and not (type(data[key]) is int and data[key] >= 1)
    ]
    if "chunks" in data and not isinstance(data["chunks"], list):
        problems.append(f'"chunks" must be a JSON array, got {_describe(data["chunks"])}')
    if problems:
        raise _BadLine("; ".join(problems))
    chunks: list[Chunk] = []
    assembler = BlockAssembler()
    finish: int | None = None
    for i, item in enumerate(data["chunks"]):
        try:
            chunk = chunk_from_json(item)
            if finish is not None:
                raise _BadLine(f"chunk {i}: a {chunk.type} chunk after the finish (chunk {finish})")
            assembler.push(chunk)
        except (LlmFormatError, AssemblyError) as exc:
            raise _BadLine(f"chunk {i}: {exc}") from None
        if isinstance(chunk, Finish):
            finish = i
        chunks.append(chunk)
    return (data["turn"], data["step"]), tuple(chunks)


def parse_replay(text: str, source: str = "<replay>") -> dict[tuple[int, int], tuple[Chunk, ...]]:
    """Read a replay file's text: one ``{"turn", "step", "chunks"}`` object per line.

    Blank lines are skipped. Every line is checked (JSON, keys, positive ``turn`` and
    ``step``, each chunk as :func:`dsh_llm.chunk_from_json` reads it, a stream the
    :class:`dsh_llm.BlockAssembler` accepts, nothing after a finish, no repeated
    ``(turn, step)``); one :class:`ReplayFileError` lists every bad line as
    ``<source>:<line>: <problem>``.
    """
    recordings: dict[tuple[int, int], tuple[Chunk, ...]] = {}
    first_seen: dict[tuple[int, int], int] = {}
    problems: list[str] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            key, chunks = _parse_line(line)  # columns count from the line's start
        except _BadLine as exc:
            problems.append(f"{source}:{number}: {exc}")
            continue
        if key in first_seen:
            problems.append(
                f"{source}:{number}: a second recording for turn {key[0]}, step {key[1]} "
                f"(the first is on line {first_seen[key]})"
            )
            continue
        first_seen[key] = number
        recordings[key] = chunks
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise ReplayFileError(f"invalid replay file {source}:\n{lines}", problems)
    return recordings


def record_session(session: Session) -> str:
    """The replay file (JSONL text) of ``session``'s ``assistant/chunk`` events.

    Streams are grouped by ``(turn, step)`` in the order they began; each chunk is
    re-encoded with :func:`dsh_llm.chunk_to_json`. Feeding the text to ``llm-replay``
    plays the session's model calls back.
    """
    streams: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for event in session.events:
        if event.type == "assistant/chunk":
            data = event.data
            key = (data["turn"], data["step"])
            streams.setdefault(key, []).append(chunk_to_json(chunk_from_json(data["chunk"])))
    return "".join(
        json.dumps({"turn": turn, "step": step, "chunks": chunks}, ensure_ascii=False) + "\n"
        for (turn, step), chunks in streams.items()
    )


def resolve_replay_path(file: str, entry: object = None) -> Path:
    """Where ``file`` is: absolute as given; relative to the deployment file of
    ``entry`` (a fiber's ``entry`` when it was loaded from YAML), else to the current
    directory."""
    path = Path(file)
    deployment = getattr(getattr(entry, "spec", None), "file", None)
    base = Path.cwd() if deployment is None else Path(deployment).parent
    return (base / path).absolute()


# -- the adapter and the plugin -----------------------------------------------------------


class ReplayAdapter:
    """A model adapter that answers request ``(turn, step)`` with its recording."""

    def __init__(self, recordings: Recordings, source: str = "<replay>") -> None:
        self.recordings = recordings
        self.source = source
        self._played: set[tuple[int | None, int | None]] = set()

    def unplayed(self) -> list[tuple[int, int]]:
        """The recorded ``(turn, step)`` pairs no request has asked for, sorted."""
        return sorted(key for key in self.recordings if key not in self._played)

    async def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        """Play the recording of ``(request.turn, request.step)``, one chunk per
        scheduling point; a missing one is one ``Finish("error")`` (``REPLAY_MISSING``)."""
        turn, step = request.turn, request.step
        self._played.add((turn, step))
        unnumbered = turn is None or step is None
        chunks = None if turn is None or step is None else self.recordings.get((turn, step))
        if chunks is None:
            why = " (the request carries no turn and step)" if unnumbered else ""
            yield Finish(
                "error",
                LlmFailure(
                    f"no recorded stream for turn {turn}, step {step} in {self.source}{why}",
                    "REPLAY_MISSING",
                ),
            )
            return
        for chunk in chunks:
            await anyio.lowlevel.checkpoint()
            yield chunk


class LlmReplay(Plugin):
    """Serves ``models`` by replaying the streams recorded in ``file``."""

    name = "llm-replay"
    Config = LlmReplayConfig
    inject = ("llm",)

    adapter: ReplayAdapter

    async def setup(self) -> AsyncIterator[Disposer]:
        config: LlmReplayConfig = self.config
        path = resolve_replay_path(config.file, self.ctx.fiber.entry)
        try:
            text = await anyio.Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ReplayFileError(f"cannot read replay file {path}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ReplayFileError(
                f"replay file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from exc
        self.adapter = ReplayAdapter(parse_replay(text, str(path)), str(path))
        yield self.ctx.llm.register_adapter(config.models, self.adapter)
