"""``dsh check``: every loaded plugin verifies what it owns through ``deployment/check``."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.testing import write_deployment
from tests.support import dsh_main

CHECKS = """\
def passing(ctx, config):
    async def check(report):
        report.ok("passing is fine")
        report.warn("passing has a remark")

    return ctx.on("deployment/check", check)


def failing(ctx, config):
    def check(report):
        report.fail(f"{report.path}: failing found a problem (agent {report.agent})")

    return ctx.on("deployment/check", check)


def raising(ctx, config):
    def broken_check(report):
        raise RuntimeError("the check itself broke")

    return ctx.on("deployment/check", broken_check)
"""


def check_deployment(tmp_path: Path, *names: str) -> Path:
    (tmp_path / "checks.py").write_text(CHECKS)
    entries = "".join(f"- {{id: {n}, name: './checks.py:{n}'}}\n" for n in names)
    return write_deployment(tmp_path, entries)


def test_phrases_warnings_and_problems_of_the_listeners(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = check_deployment(tmp_path, "passing")
    assert dsh_main(capsys, "check", str(path)) == (
        0,
        f"{path}: ok (1 plugin entry active, passing is fine)\n",
        "warning: passing has a remark\n",
    )
    path = check_deployment(tmp_path, "passing", "failing")
    assert dsh_main(capsys, "check", str(path), "--agent", "x") == (
        1,
        "",
        f"warning: passing has a remark\n{path}: failing found a problem (agent x)\n",
    )


def test_a_check_that_raises_is_a_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = check_deployment(tmp_path, "raising", "passing")
    status, _, err = dsh_main(capsys, "check", str(path))
    assert status == 1
    assert err.endswith(
        f"{path}: the check raising.<locals>.broken_check raised RuntimeError: "
        "the check itself broke\n"
    )


def test_an_empty_deployment_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_deployment(tmp_path, "# nothing here yet\n")
    assert dsh_main(capsys, "check", str(path)) == (
        0,
        f"{path}: ok (0 plugin entries active)\n",
        f"warning: {path}: the deployment has no entries: it runs nothing\n",
    )
