"""A ``provider`` that names no registered subagent provider: a located ``dsh check``
error naming the known ones, and the same error at the first turn (not a silent INFO)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dsh import Context, cli, load_deployment
from dsh.testing import ScriptedModel, run_turn, text, write_deployment

pytestmark = pytest.mark.anyio

ENTRIES = """\
- {id: core, name: agent-core, config: {model: scripted}}
- {id: subagent, name: subagent}
- {id: spawn, name: subagent-spawn}
- {id: fork, name: subagent-fork}
- id: tool
  name: tool-subagent
  config: {provider: nope}
"""

#: A plugin module serving the model "scripted".
MODEL = """\
from dsh.testing import ScriptedModel

inject = ["llm"]


def apply(ctx, config):
    return ScriptedModel().install(ctx)
"""


def expected(path: Path) -> str:
    return (
        f'{path}:7: tool "subagent": subagent provider "nope" is not registered; known: fork, spawn'
    )


def test_dsh_check_passes_a_registered_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    path = write_deployment(
        tmp_path, "- {id: model, name: ./model.py}\n" + ENTRIES.replace("nope", "fork")
    )
    assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().err == ""


def test_dsh_check_names_the_value_and_the_known_providers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The scripted model is served by nothing here: that problem is reported too.
    path = write_deployment(tmp_path, ENTRIES)
    assert cli.main(["check", str(path)]) == 1
    assert f"\n{expected(path)}\n" in f"\n{capsys.readouterr().err}"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_first_turn_logs_the_same_error_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_deployment(tmp_path, ENTRIES)
    model = ScriptedModel(text("one"), text("two"))
    async with Context() as root:
        await load_deployment(path, root)
        model.install(root)
        with caplog.at_level(logging.INFO, "dsh.tool-subagent"):
            await run_turn(root.agents.get("main"), "hi")
            await run_turn(root.agents.get("main"), "again")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("ERROR", expected(path))]
