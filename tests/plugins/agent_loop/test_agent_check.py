"""``dsh check`` fails what ``dsh run`` would fail: a model no adapter serves, an agent
without a model; and a declared agent's ``{{cwd}}`` is where the deployment runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh import cli
from dsh.testing import write_deployment
from tests.support import echo_deployment

REWRITER = """\
def apply(ctx, config):
    def pick(agent, request, call_next):
        return call_next()

    return ctx.on("agent/request", pick)


inject = ["agents"]
"""


def test_a_model_no_adapter_serves_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = echo_deployment(tmp_path, "{model: not-served}")
    assert cli.main(["check", str(path)]) == 1
    assert capsys.readouterr().err == (
        f'{path}: agent "main" uses model "not-served", which no adapter serves; '
        'known models: "echo-mock"\n'
    )
    # dsh run fails the same way (NO_ADAPTER), which is what check now predicts.
    assert cli.main(["run", str(path), "-p", "hi"]) == 1
    assert "NO_ADAPTER" in capsys.readouterr().err


def test_an_agent_without_a_model_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = echo_deployment(tmp_path, "{agents: [{id: a}, {id: b, model: echo-mock}]}")
    assert cli.main(["check", str(path)]) == 1
    assert capsys.readouterr().err == (
        f'{path}: agent "a" has no model: set `model` on agent-core (or on the agent in `agents`)\n'
    )
    assert cli.main(["check", str(path), "--agent", "b"]) == 0
    assert capsys.readouterr().out.endswith('prompt renders for agent "b" (1 tool))\n')


def test_a_request_listener_makes_model_problems_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rewriter.py").write_text(REWRITER)
    path = echo_deployment(tmp_path, "{agents: [{id: a}]}", "- {id: pick, name: ./rewriter.py}\n")
    assert cli.main(["check", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f'warning: {path}: agent "a" has no model: set `model` on agent-core (or on the '
        "agent in `agents`)\n"
    )
    assert captured.out.startswith(f"{path}: ok (4 plugin entries active")


def test_a_declared_agent_works_where_the_deployment_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    path = echo_deployment(tmp_path, "{model: echo-mock, persona: 'Working in {{cwd}}.'}")
    assert cli.main(["check", str(path)]) == 0
    assert "prompt renders for agent" in capsys.readouterr().out
    assert cli.main(["prompt", str(path)]) == 0
    assert f"Working in {os.getcwd()}." in capsys.readouterr().out
    assert cli.main(["run", str(path), "-p", "echo here"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: here\n"
    # An explicit cwd still wins.
    other = tmp_path / "other"
    other.mkdir()
    path = write_deployment(
        other,
        f"""\
        - {{id: model, name: {tmp_path}/mock_model.py}}
        - {{id: core, name: agent-core, config: {{agents: [{{id: a, model: echo-mock,
            persona: 'In {{{{cwd}}}}.', cwd: /srv/app}}]}}}}
        """,
    )
    assert cli.main(["prompt", str(path)]) == 0
    assert "In /srv/app." in capsys.readouterr().out
