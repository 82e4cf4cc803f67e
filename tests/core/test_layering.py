"""The runtime is the ground floor: nothing in ``dsh/`` depends on a plugin package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

DSH = Path(__file__).parents[2] / "dsh"
MODULES = sorted(DSH.rglob("*.py"))


def _imported(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_module_of_dsh_imports_a_plugin_package(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    plugins = [name for name in _imported(tree) if name.split(".")[0].startswith("dsh_")]
    assert plugins == [], f"dsh/{path.name} imports plugin packages: {plugins}"


def test_importing_every_module_of_dsh_loads_no_plugin_package() -> None:
    names = [
        "dsh" + "".join(f".{part}" for part in p.relative_to(DSH).with_suffix("").parts)
        for p in MODULES
        if p.name != "__init__.py" or p.parent != DSH
    ]
    names = [n.removesuffix(".__init__") for n in names if not n.endswith("__main__")]
    script = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('dsh_')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout == "[]\n"
