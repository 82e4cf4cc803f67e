"""The ``llm-replay`` plugin on a real runtime: config, file loading, the adapter."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import dsh_llm_replay
from dsh import ConfigError, Context, Fiber, FiberState
from dsh.testing import ScriptedModel
from dsh_llm import (
    Chunk,
    DuplicateAdapterError,
    Finish,
    Llm,
    LlmFailure,
    LlmRequest,
    TextDelta,
    Usage,
    UsageChunk,
)
from dsh_llm_replay import (
    LlmReplay,
    LlmReplayConfig,
    ReplayAdapter,
    ReplayFileError,
    resolve_replay_path,
)
from tests.plugins.llm.llm_support import collect, request
from tests.plugins.llm_replay.replay_support import write_replay

pytestmark = pytest.mark.anyio

HELLO_CHUNKS: list[Chunk] = [
    TextDelta(0, "Hel"),
    TextDelta(0, "lo"),
    UsageChunk(Usage(4, 2)),
    Finish("stop"),
]
BYE_CHUNKS: list[Chunk] = [TextDelta(0, "Bye"), Finish("stop")]


def replay_request(model: str = "replay", turn: int | None = 1, step: int | None = 1) -> LlmRequest:
    """A request for the replay model at ``turn`` and ``step``."""
    return request(model, turn=turn, step=step)


async def mount(root: Context, config: dict[str, Any]) -> Fiber:
    await root.plugin(Llm)
    return await root.plugin(LlmReplay, config)


# --- config ------------------------------------------------------------------------------


def test_the_package_plugin() -> None:
    assert dsh_llm_replay.plugin is LlmReplay
    assert LlmReplay.name == "llm-replay"
    assert tuple(LlmReplay.inject) == ("llm",)
    assert LlmReplayConfig(file="x.jsonl").models == ["replay"]


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({}, "Field required (at file)"),
        ({"file": ""}, "String should have at least 1 character (at file)"),
        ({"file": "a", "models": []}, "List should have at least 1 item"),
        ({"file": "a", "models": ["ok", ""]}, "at least 1 character (at models.1)"),
        ({"file": "a", "speed": 2}, "Extra inputs are not permitted (at speed)"),
    ],
)
async def test_a_bad_config_fails_the_fiber(config: dict[str, Any], problem: str) -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match='invalid config for plugin "llm-replay"') as caught:
            await mount(root, config)
        assert problem in str(caught.value)
        assert root.llm.models() == []


# --- loading -----------------------------------------------------------------------------


async def test_a_relative_file_resolves_against_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_replay(tmp_path / "rec.jsonl", (1, 1, HELLO_CHUNKS))
    monkeypatch.chdir(tmp_path)
    async with Context() as root:
        fiber = await mount(root, {"file": "rec.jsonl"})
        assert fiber.state is FiberState.ACTIVE
        adapter = fiber.instance.adapter
        assert adapter.source == str(tmp_path / "rec.jsonl")
        assert await collect(root.llm, replay_request()) == HELLO_CHUNKS


async def test_an_absolute_file_and_custom_models(tmp_path: Path) -> None:
    path = write_replay(tmp_path / "rec.jsonl", (1, 1, HELLO_CHUNKS))
    async with Context() as root:
        await mount(root, {"file": str(path), "models": ["fake-a", "fake-b"]})
        assert root.llm.models() == ["fake-a", "fake-b"]
        assert await collect(root.llm, replay_request("fake-b")) == HELLO_CHUNKS


def test_resolve_replay_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    yaml_entry = SimpleNamespace(spec=SimpleNamespace(file=Path("/deploy/dsh.yml")))
    assert resolve_replay_path("r.jsonl", yaml_entry) == Path("/deploy/r.jsonl")
    assert resolve_replay_path("sub/r.jsonl") == tmp_path / "sub" / "r.jsonl"
    assert resolve_replay_path("/abs/r.jsonl", yaml_entry) == Path("/abs/r.jsonl")
    assert resolve_replay_path("r.jsonl", object()) == tmp_path / "r.jsonl"


async def test_a_missing_file_fails_the_fiber(tmp_path: Path) -> None:
    path = tmp_path / "absent.jsonl"
    async with Context() as root:
        with pytest.raises(ReplayFileError) as caught:
            await mount(root, {"file": str(path)})
        assert str(caught.value) == f"cannot read replay file {path}: No such file or directory"
        assert root.llm.models() == []


async def test_a_file_that_is_not_utf8_fails_the_fiber(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_bytes(b'{"turn": 1, "step": 1, "chunks": []}\n\xff\xfe\n')
    async with Context() as root:
        with pytest.raises(ReplayFileError, match=r"is not UTF-8 text \(invalid start byte at"):
            await mount(root, {"file": str(path)})


async def test_a_malformed_file_fails_the_fiber_naming_each_line(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text('{"turn": 1, "step": 1, "chunks": []}\n\n{"turn": 1}\n', encoding="utf-8")
    async with Context() as root:
        fiber = root.plugin(Llm)
        replay = root.plugin(LlmReplay, {"file": str(path)})
        await fiber
        with pytest.raises(ReplayFileError) as caught:
            await replay
        assert caught.value.problems == [f'{path}:3: missing key "step"; missing key "chunks"']
        assert replay.state is FiberState.FAILED
        assert root.llm.models() == []


async def test_a_model_already_served_fails_the_fiber(tmp_path: Path) -> None:
    path = write_replay(tmp_path / "rec.jsonl")

    async with Context() as root:
        await root.plugin(Llm)
        ScriptedModel(models=["replay"]).install(root)
        with pytest.raises(DuplicateAdapterError, match='model "replay" is already registered'):
            await root.plugin(LlmReplay, {"file": str(path)})
        assert root.llm.models() == ["replay"]


async def test_disposing_the_plugin_restores_the_registry(tmp_path: Path) -> None:
    path = write_replay(tmp_path / "rec.jsonl", (1, 1, HELLO_CHUNKS))
    async with Context() as root:
        await root.plugin(Llm)
        llm: Llm = root.llm
        before = dict(llm._routes)
        fiber = await root.plugin(LlmReplay, {"file": str(path), "models": ["r1", "r2"]})
        assert llm.models() == ["r1", "r2"]
        await fiber.dispose()
        assert llm._routes == before


async def test_restart_reads_the_file_again(tmp_path: Path) -> None:
    path = write_replay(tmp_path / "rec.jsonl", (1, 1, HELLO_CHUNKS))
    async with Context() as root:
        fiber = await mount(root, {"file": str(path)})
        assert await collect(root.llm, replay_request()) == HELLO_CHUNKS
        write_replay(path, (1, 1, BYE_CHUNKS))
        await fiber.restart()
        assert await collect(root.llm, replay_request()) == BYE_CHUNKS


# --- replaying ---------------------------------------------------------------------------


async def test_requests_are_answered_by_turn_and_step(tmp_path: Path) -> None:
    path = write_replay(
        tmp_path / "rec.jsonl", (1, 1, HELLO_CHUNKS), (1, 2, BYE_CHUNKS), (2, 1, [])
    )
    async with Context() as root:
        fiber = await mount(root, {"file": str(path)})
        adapter: ReplayAdapter = fiber.instance.adapter
        assert adapter.unplayed() == [(1, 1), (1, 2), (2, 1)]
        assert await collect(root.llm, replay_request(turn=1, step=2)) == BYE_CHUNKS
        assert await collect(root.llm, replay_request(turn=1, step=1)) == HELLO_CHUNKS
        assert (
            await collect(root.llm, replay_request(turn=1, step=1)) == HELLO_CHUNKS
        )  # replayable again
        assert adapter.unplayed() == [(2, 1)]
        # A recording without a finish gets no implicit one.
        assert await collect(root.llm, replay_request(turn=2, step=1)) == []
        assert adapter.unplayed() == []


async def test_a_missing_recording_is_one_replay_missing_finish(tmp_path: Path) -> None:
    path = write_replay(tmp_path / "rec.jsonl", (1, 1, HELLO_CHUNKS))
    async with Context() as root:
        await mount(root, {"file": str(path)})
        assert await collect(root.llm, replay_request(turn=3, step=2)) == [
            Finish(
                "error",
                LlmFailure(f"no recorded stream for turn 3, step 2 in {path}", "REPLAY_MISSING"),
            )
        ]
        assert await collect(root.llm, replay_request(turn=None, step=1)) == [
            Finish(
                "error",
                LlmFailure(
                    f"no recorded stream for turn None, step 1 in {path} "
                    "(the request carries no turn and step)",
                    "REPLAY_MISSING",
                ),
            )
        ]
        [finish] = await collect(root.llm, replay_request(turn=1, step=None))
        assert isinstance(finish, Finish)
        assert finish.failure is not None
        assert finish.failure.message.endswith("(the request carries no turn and step)")


async def test_every_chunk_is_a_scheduling_point() -> None:
    adapter = ReplayAdapter({(1, 1): tuple(HELLO_CHUNKS)})
    assert adapter.source == "<replay>"
    got: list[Chunk] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with aclosing(adapter.stream(replay_request())) as chunks:
            got = [chunk async for chunk in chunks]  # cancelled before the first chunk
    assert scope.cancelled_caught
    assert got == []

    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        async with aclosing(adapter.stream(replay_request())) as chunks:
            seen = [ticks async for _ in chunks]
        tg.cancel_scope.cancel()
    assert seen == sorted(seen)
    assert seen[-1] > seen[0]  # the other task ran while the recording played
