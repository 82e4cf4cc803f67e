"""Watching files with ``watchfiles``: batches of changed paths, debounced."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from dsh import PluginLoadError

__all__ = ["Watcher", "load_awatch"]

#: How often (ms) the watching thread looks for new changes.
_STEP_MS = 20


def load_awatch() -> Callable[..., Any]:
    """``watchfiles.awatch``; a :class:`dsh.PluginLoadError` naming the extra when the
    package is not installed."""
    try:
        from watchfiles import awatch
    except ImportError as exc:
        raise PluginLoadError(
            "hot-reload watches files with watchfiles, which is not installed: "
            "pip install 'dsh-harness[watch]'"
        ) from exc
    return awatch


class Watcher:
    """Calls ``on_change(paths)`` for the changes among ``wanted()`` (files, and
    directories whose every file counts): everything that changes within ``debounce``
    seconds of the first change is one call. Files are watched through their
    directory (an editor may replace a file rather than write it)."""

    def __init__(
        self,
        wanted: Callable[[], list[Path]],
        debounce: float,
        on_change: Callable[[set[Path]], Awaitable[object]],
    ) -> None:
        self.wanted = wanted
        self.debounce = debounce
        self.on_change = on_change
        self._watching: list[Path] = []
        self._stop = anyio.Event()
        self._closed = False

    async def run(self) -> None:
        awatch = load_awatch()
        send, receive = anyio.create_memory_object_stream[set[Path]](math.inf)
        async with send, receive, anyio.create_task_group() as tg:
            tg.start_soon(self._produce, awatch, send)
            while True:
                batch = await receive.receive()
                with anyio.move_on_after(self.debounce):
                    while True:
                        batch |= await receive.receive()
                await self.on_change(batch)
                self.refresh()

    def refresh(self) -> None:
        """Watch what ``wanted()`` says now; the watching threads start again only
        when the directories to watch changed."""
        wanted = self.wanted()
        if _roots(wanted) != _roots(self._watching):
            self._stop.set()
        self._watching = wanted

    def stop(self) -> None:
        """End the watching threads (before the task that runs them is cancelled)."""
        self._closed = True
        self._stop.set()

    async def _produce(
        self, awatch: Callable[..., Any], send: MemoryObjectSendStream[set[Path]]
    ) -> None:
        while not self._closed:
            self._watching = self.wanted()
            stop = self._stop = anyio.Event()
            files, dirs = _roots(self._watching)
            async with anyio.create_task_group() as tg:
                for roots, recursive in ((files, False), (dirs, True)):
                    if roots:
                        tg.start_soon(self._follow, awatch, sorted(roots), recursive, stop, send)

    async def _follow(
        self,
        awatch: Callable[..., Any],
        roots: list[Path],
        recursive: bool,
        stop: anyio.Event,
        send: MemoryObjectSendStream[set[Path]],
    ) -> None:
        async for changes in awatch(
            *roots,
            debounce=int(self.debounce * 1000) or _STEP_MS,
            step=_STEP_MS,
            stop_event=stop,
            recursive=recursive,
        ):
            hits = {Path(p) for _, p in changes if _counts(Path(p), self._watching)}
            if hits:
                send.send_nowait(hits)


def _roots(wanted: list[Path]) -> tuple[set[Path], set[Path]]:
    """The directories to watch: those of the files (not recursively), and the
    wanted directories (recursively)."""
    files = {path.parent for path in wanted if not path.is_dir()}
    return files, {path for path in wanted if path.is_dir()}


def _counts(path: Path, wanted: list[Path]) -> bool:
    return any(path == w or w in path.parents for w in wanted)
