"""A ``fetch_provider`` or ``search_provider`` that names no registered provider: a
located ``dsh check`` error naming the known ones, and the same error at the first turn."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dsh import Context, cli, load_deployment
from dsh.testing import ScriptedModel, run_turn, text, write_deployment

pytestmark = pytest.mark.anyio


def named(tmp_path: Path, key: str, *entries: str) -> Path:
    lines = [
        "- id: web\n",
        "  name: web\n",
        f"  config: {{{key}: nope}}\n",
        "- {id: web-fetch, name: web-fetch}\n",
        *entries,
    ]
    return write_deployment(tmp_path, "".join(lines))


@pytest.mark.parametrize(
    ("key", "known"), [("fetch_provider", "http"), ("search_provider", "(none)")]
)
def test_dsh_check_names_the_value_and_the_known_providers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, known: str
) -> None:
    path = named(tmp_path, key)
    assert cli.main(["check", str(path)]) == 1
    assert capsys.readouterr().err == (
        f'{path}:3: web {key} "nope" is not registered; known: {known}\n'
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_first_turn_logs_the_same_error_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = named(
        tmp_path, "fetch_provider", "- {id: core, name: agent-core, config: {model: scripted}}\n"
    )
    model = ScriptedModel(text("one"), text("two"))
    async with Context() as root:
        await load_deployment(path, root)
        model.install(root)
        with caplog.at_level(logging.ERROR, "dsh.web"):
            await run_turn(root.agents.get("main"), "hi")
            await run_turn(root.agents.get("main"), "again")
    assert [r.getMessage() for r in caplog.records if r.name == "dsh.web"] == [
        f'{path}:3: web fetch_provider "nope" is not registered; known: http'
    ]
