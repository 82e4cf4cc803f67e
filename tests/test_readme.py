"""The README's examples work as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
