"""``spill_dir`` is checked when bash-local starts: a place where no spill folder can
be made fails ``dsh check`` (and every start) with the key, the path and the problem,
instead of a warning at every long output (issue 23)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh import ConfigError, Context, cli
from dsh.testing import write_deployment
from dsh_bash import Bash
from dsh_bash_local import LocalBash
from tests.support import entry_after


def deployment(directory: Path, config: str) -> Path:
    entries = entry_after("- {id: bash, name: bash}", "local", "bash-local", config)
    return write_deployment(directory, entries)


@pytest.mark.parametrize(
    ("spill_dir", "problem"),
    [
        ("taken", "is a regular file, not a directory"),
        ("missing", "does not exist"),
        ("fifo", "is not a directory"),
    ],
)
def test_a_spill_dir_that_cannot_hold_the_spill_folder_fails_the_check(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    spill_dir: str,
    problem: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("a file\n")
    os.mkfifo(tmp_path / "fifo")
    path = deployment(tmp_path, f"{{spill_dir: {spill_dir}}}")
    assert cli.main(["check", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"deployment {path} has 1 problem:\n"
        f'{path}:4: bash-local spill_dir "{tmp_path / spill_dir}" cannot be used: it '
        f"{problem} (the spill folder of long outputs is made in it)\n"
    )


def test_a_usable_spill_dir_or_no_spilling_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spills").mkdir()
    for config in ("{spill_dir: spills}", "{spill_dir: missing, spill_max_bytes: 0}", "{}"):
        path = deployment(tmp_path, config)
        assert cli.main(["check", str(path)]) == 0, config
        assert capsys.readouterr().out.startswith(f"{path}: ok")


@pytest.mark.anyio
async def test_an_unwritable_spill_dir_started_in_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root writes anywhere: a folder another user could not write in, simulated.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    async with Context() as root:
        await root.plugin(Bash)
        fiber = root.plugin(LocalBash, {"spill_dir": str(tmp_path)})
        await fiber.settled()
    assert isinstance(fiber.error, ConfigError)
    assert str(fiber.error) == (
        f'bash-local spill_dir "{tmp_path}" cannot be used: it is not writable by this '
        "process (the spill folder of long outputs is made in it)"
    )
