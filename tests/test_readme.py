"""The README's examples work as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support import ROOT


def _block(tag: str) -> str:
    """The fenced code block that follows ``<!-- tag -->`` in README.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(rf"<!-- {tag} -->\n```\w*\n(.*?)\n```", text, re.DOTALL)
    assert found is not None, f"README.md has no block tagged {tag}"
    return found.group(1) + "\n"


def test_the_readme_example_test_passes(tmp_path: Path) -> None:
    (tmp_path / "test_shout.py").write_text(_block("readme-test"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shout.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^\d+ passed in ", done.stdout, re.MULTILINE), done.stdout


COVERED = """\
def shout(text):
    if text:
        return text.upper()
    return "?"


def whisper(text):
    return text.lower()
"""


@pytest.mark.parametrize("whispered", [True, False], ids=["covered", "one-line-short"])
def test_the_readme_test_command_gates_coverage_summed_over_its_workers(
    tmp_path: Path, whispered: bool
) -> None:
    """The README's test command on a two-file suite, under this project's coverage
    settings: each test file runs on its own worker, the gate passes only when the two
    workers' measurements together cover every line and branch, and otherwise names the
    line neither covered."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    lines = ['[tool.pytest.ini_options]\npythonpath = ["."]\n']
    for section, values in settings["coverage"].items():
        chosen = {**values, "source": ["shouts"]} if section == "run" else values
        lines.append(f"[tool.coverage.{section}]")
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in chosen.items())
    (tmp_path / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "shouts.py").write_text(COVERED, encoding="utf-8")
    (tmp_path / "tests").mkdir()
    seen = tmp_path / "workers"
    seen.mkdir()
    record = f"(Path({str(seen)!r}) / os.environ['PYTEST_XDIST_WORKER']).touch()"
    tests = {
        "test_shout": "assert (shout('a'), shout('')) == ('A', '?')",
        "test_whisper": "assert whisper('A') == 'a'" if whispered else "assert whisper",
    }
    for name, check in tests.items():
        (tmp_path / "tests" / f"{name}.py").write_text(
            "import os\nfrom pathlib import Path\nfrom shouts import shout, whisper\n\n\n"
            f"def {name}():\n    {record}\n    {check}\n",
            encoding="utf-8",
        )
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    (tmp_path / ".ci").symlink_to(ROOT / ".ci")
    # This suite's own measurement (and worker) must not reach the inner run.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE_", "PYTEST_"))}
    done = subprocess.run(
        ["bash", "-c", _block("test-command")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    # Each file ran on a worker of its own (which two of the workers is the scheduler's).
    assert len(list(seen.iterdir())) == 2, done.stdout + done.stderr
    if whispered:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "coverage gate: 1 files at 100% branch coverage" in done.stdout
    else:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "shouts.py: 87.50% (missing lines [8], branches [])" in done.stdout
