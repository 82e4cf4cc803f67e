"""``import dsh`` loads only what defines its public names (RFC 0017)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import dsh
from dsh._disposer import native_cancels

#: Modules ``import dsh`` must leave alone: deployments (YAML, entry points), config
#: validation (pydantic), the command line, and the asyncio backend until it runs.
HEAVY = {
    "argparse",
    "asyncio",
    "dataclasses",
    "importlib.metadata",
    "logging",
    "pydantic",
    "pydantic_core",
    "yaml",
}
#: dsh's own modules behind the lazy names.
LAZY = {"dsh._commands", "dsh._config", "dsh._deployment", "dsh._report", "dsh._yaml"}

PROBE = """
import json, sys
before = set(sys.modules)
import dsh
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def imported_by(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    loaded: list[str] = json.loads(out)
    return set(loaded)


def test_import_dsh_leaves_the_heavy_modules_alone() -> None:
    # (Under coverage the interpreter has some of them already: then they do not show.)
    loaded = imported_by(PROBE)
    assert "dsh" in loaded
    assert loaded.isdisjoint(HEAVY | LAZY), sorted(loaded & (HEAVY | LAZY))


def test_the_lazy_names_load_their_modules_on_first_use() -> None:
    code = PROBE.replace(
        "import dsh\n",
        "import dsh\ndsh.load_deployment, dsh.CheckReport, dsh.Command, dsh.EntryInfo\n",
    )
    assert imported_by(code) >= LAZY


def test_every_public_name_resolves_and_is_listed() -> None:
    for name in dsh.__all__:
        assert getattr(dsh, name) is not None
    assert set(dsh.__all__) <= set(dir(dsh))
    assert dsh.validate_config is dsh._config.validate_config
    assert dsh.EntryInfo is dsh._config.EntryInfo
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = dsh.no_such_name


def test_no_asyncio_means_no_native_cancellation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "asyncio")
    assert native_cancels() == 0
