"""``dsh run --watch``: the run goes on with hot-reload watching its deployment."""

from __future__ import annotations

from typing import Any

import pytest

import dsh_hot_reload
from dsh import Fiber, cli
from tests.support import ECHO


def test_run_watch_starts_hot_reload_on_the_deployment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[Any] = []
    original = dsh_hot_reload.watch

    async def watch(deployment: Fiber) -> Fiber | None:
        fiber = await original(deployment)
        started.append((fiber, deployment.ctx.hot_reload.watched()))
        return fiber

    monkeypatch.setattr(dsh_hot_reload, "watch", watch)
    assert cli.main(["run", str(ECHO), "-p", "echo hi", "--watch"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: hi\n"
    [(fiber, watched)] = started
    assert fiber.name == "hot-reload"
    assert fiber.state.name == "DISPOSED"
    assert ECHO.resolve() in watched
