"""The documentation stays true: error codes, plugin READMEs, RFCs and exports."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import dsh
from tests.support import ROOT

PLUGIN_DIRS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").exists())
PACKAGES = ["dsh", *(p.name for p in PLUGIN_DIRS)]


def _error_classes() -> list[type[dsh.DshError]]:
    for package in PACKAGES:
        importlib.import_module(package)
    found: list[type[dsh.DshError]] = [dsh.DshError]
    pending = [dsh.DshError]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub.__module__.split(".")[0] in PACKAGES and sub not in found:
                found.append(sub)
                pending.append(sub)
    return found


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_code_is_in_the_table(cls: type[dsh.DshError]) -> None:
    table = (ROOT / "docs" / "errors.md").read_text()
    row = re.search(rf"^\| `{cls.code}` \|[^\n]*`{cls.__name__}`", table, re.MULTILINE)
    assert row is not None, f"docs/errors.md has no row for {cls.__name__} ({cls.code})"


@pytest.mark.parametrize("package", PLUGIN_DIRS, ids=lambda p: p.name)
def test_plugin_readme_follows_the_template(package: Path) -> None:
    text = (package / "README.md").read_text()
    first = text.splitlines()[0]
    assert re.fullmatch(rf"# \S+ +\(import: {package.name}\)", first), first
    for heading in ("## What the model sees", "## What is NOT here"):
        assert heading in text, f"{package.name}/README.md lacks {heading!r}"


@pytest.mark.parametrize("package", PACKAGES)
def test_public_names_are_exported_explicitly(package: str) -> None:
    module = importlib.import_module(package)
    names = module.__all__
    assert len(set(names)) == len(names), f"{package}.__all__ repeats a name"
    for name in names:
        assert hasattr(module, name), f"{package}.__all__ names missing {name!r}"
    assert (ROOT / ("dsh" if package == "dsh" else f"plugins/{package}") / "py.typed").exists()


@pytest.mark.parametrize("rfc", sorted((ROOT / "docs" / "rfc").glob("*.md")), ids=lambda p: p.name)
def test_rfcs_have_the_required_sections(rfc: Path) -> None:
    text = rfc.read_text()
    assert re.fullmatch(r"\d{4}-[a-z0-9-]+\.md", rfc.name)
    assert text.startswith(f"# RFC {rfc.name[:4]}: ")
    order = [
        "Status:",
        "## Problem",
        "## Decision",
        "## Alternatives considered",
        "## Invariants delivered",
        "## Consequences",
    ]
    positions = [text.find(marker) for marker in order]
    assert -1 not in positions, f"{rfc.name} lacks {order[positions.index(-1)]}"
    assert positions == sorted(positions), f"{rfc.name}: sections out of order"


def test_the_architecture_page_places_every_plugin_package() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = [p.name for p in PLUGIN_DIRS if f"`{p.name}`" not in text]
    assert missing == [], f"docs/architecture.md does not place {missing}"
    assert "docs/architecture.md" in (ROOT / "README.md").read_text()


def _test_references() -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    for doc in [*sorted((ROOT / "docs").rglob("*.md")), *sorted(ROOT.glob("plugins/*/README.md"))]:
        for path, name in re.findall(r"(tests/[\w/]+\.py)::(\w+)", doc.read_text()):
            found.append((doc.name, path, name))
    return found


@pytest.mark.parametrize(("doc", "path", "name"), _test_references())
def test_every_test_a_document_names_exists(doc: str, path: str, name: str) -> None:
    source = ROOT / path
    assert source.is_file(), f"{doc} names {path}, which does not exist"
    assert re.search(rf"^(async )?def {name}\(", source.read_text(), re.MULTILINE), (
        f"{doc} names {path}::{name}, which does not exist"
    )


def test_no_project_file_points_outside_the_project() -> None:
    tracked = [p for p in ROOT.rglob("*.md") if ".venv" not in p.parts]
    for doc in tracked:
        text = doc.read_text()
        assert "../shared" not in text, doc
        assert "steering repository" not in text, doc
