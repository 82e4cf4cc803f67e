"""Mutation testing of the runtime and the spine: do the tests notice a broken line?

Run by hand (not by CI): ``.venv/bin/python .ci/mutation.py [--count N] [--seed S]``.

It lists every mutation site of the target files (a comparison flipped, ``and``/``or``
swapped, a ``not`` dropped, a boolean or integer constant changed, a statement replaced
by ``pass``, a returned value replaced by ``None``), samples ``--count`` of them with a
fixed seed, and for each one writes the mutated file into a private copy of the
project and runs the tests of that area there (``PYTHONPATH`` puts the copy ahead of
the installed project). A mutant is *killed* when the tests fail or time out. The
survivors are printed with their location, to be read: some are equivalent (the
mutation changes nothing observable), the others are missing tests.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The files mutated, and the tests run against each (paths relative to the project).
TARGETS: dict[str, list[str]] = {
    "dsh/_check.py": ["tests/core"],
    "dsh/_commands.py": ["tests/core", "tests/plugins/stdio_agent"],
    "dsh/_config.py": ["tests/core"],
    "dsh/_context.py": ["tests/core"],
    "dsh/_deployment.py": ["tests/core"],
    "dsh/_disposer.py": ["tests/core"],
    "dsh/_events.py": ["tests/core"],
    "dsh/_fiber.py": ["tests/core"],
    "dsh/_fiber_hookimpls.py": ["tests/core"],
    "dsh/_fiber_unwind.py": ["tests/core"],
    "dsh/_inflight.py": ["tests/core"],
    "dsh/_plugin.py": ["tests/core"],
    "dsh/_resolve.py": ["tests/core"],
    "dsh/_runtime.py": ["tests/core"],
    "dsh/_yaml.py": ["tests/core"],
    "plugins/dsh_system_prompt/_render.py": ["tests/plugins/system_prompt"],
    "plugins/dsh_system_prompt/_service.py": ["tests/plugins/system_prompt"],
    "plugins/dsh_system_prompt/_tool_order.py": ["tests/plugins/system_prompt"],
    "plugins/dsh_agent_loop/_agent.py": ["tests/plugins/agent_loop"],
    "plugins/dsh_agent_loop/_loop.py": ["tests/plugins/agent_loop"],
    "plugins/dsh_agent_loop/_tool_calls.py": ["tests/plugins/agent_loop"],
    "plugins/dsh_session/_session.py": ["tests/plugins/session", "tests/plugins/agent_loop"],
    "plugins/dsh_session/_store.py": ["tests/plugins/session"],
    "plugins/dsh_session/_persistence.py": [
        "tests/plugins/session_store",
        "tests/plugins/session_jsonl",
        "tests/plugins/session_sqlite",
    ],
    "plugins/dsh_session_jsonl/_log.py": [
        "tests/plugins/session_jsonl",
        "tests/plugins/session_store",
    ],
    "plugins/dsh_session_jsonl/_format.py": [
        "tests/plugins/session_jsonl",
        "tests/plugins/session_store",
    ],
    "plugins/dsh_session_jsonl/_plugin.py": [
        "tests/plugins/session_jsonl",
        "tests/plugins/session_store",
    ],
    "plugins/dsh_session_jsonl/_listing.py": [
        "tests/plugins/session_jsonl",
        "tests/plugins/session_store",
    ],
    "plugins/dsh_session_sqlite/_db.py": [
        "tests/plugins/session_sqlite",
        "tests/plugins/session_store",
    ],
    "plugins/dsh_session_sqlite/_locks.py": ["tests/plugins/session_sqlite"],
    "plugins/dsh_session_sqlite/_log.py": [
        "tests/plugins/session_sqlite",
        "tests/plugins/session_store",
    ],
    "plugins/dsh_session_sqlite/_listing.py": [
        "tests/plugins/session_sqlite",
        "tests/plugins/session_store",
    ],
    "plugins/dsh_session_sqlite/_plugin.py": [
        "tests/plugins/session_sqlite",
        "tests/plugins/session_store",
    ],
    "plugins/dsh_session/_paths.py": ["tests/plugins/session"],
    "dsh/lifeline.py": ["tests/core/test_lifeline.py"],
    "dsh/_shutdown.py": ["tests/core/test_sigterm.py"],
    "dsh/_stderr.py": ["tests/core/test_sigterm.py"],
    "plugins/dsh_fs_local/_atomic.py": ["tests/plugins/fs_local"],
    "plugins/dsh_fs_local/_backend.py": ["tests/plugins/fs_local"],
    "plugins/dsh_fs_local/_deny.py": ["tests/plugins/fs_local"],
    "plugins/dsh_fs_local/_fence.py": ["tests/plugins/fs_local"],
    "plugins/dsh_fs_local/_ignore.py": ["tests/plugins/fs_local"],
    "plugins/dsh_fs_local/_paths.py": ["tests/plugins/fs_local"],
    "plugins/dsh_fs_local/_walk.py": ["tests/plugins/fs_local"],
}

_FLIPS: dict[type[ast.cmpop], str] = {
    ast.Eq: "!=",
    ast.NotEq: "==",
    ast.Lt: ">=",
    ast.GtE: "<",
    ast.Gt: "<=",
    ast.LtE: ">",
    ast.Is: "is not",
    ast.IsNot: "is",
    ast.In: "not in",
    ast.NotIn: "in",
}


@dataclass(frozen=True)
class Mutant:
    path: str
    line: int
    start: int  # offsets into the file's text
    end: int
    replacement: str
    what: str

    def apply(self, text: str) -> str:
        return text[: self.start] + self.replacement + text[self.end :]


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(body[0]))
    return found


def mutants_of(path: str) -> list[Mutant]:
    """Every mutation site of one file."""
    text = (ROOT / path).read_text(encoding="utf-8")
    tree = ast.parse(text)
    starts = _offsets(text)
    skip = _docstrings(tree)
    found: list[Mutant] = []

    def span(node: ast.AST) -> tuple[int, int]:
        return (
            starts[node.lineno - 1] + node.col_offset,  # type: ignore[attr-defined]
            starts[node.end_lineno - 1] + node.end_col_offset,  # type: ignore[attr-defined]
        )

    def add(node: ast.AST, replacement: str, what: str) -> None:
        start, end = span(node)
        mutant = Mutant(path, node.lineno, start, end, replacement, what)  # type: ignore[attr-defined]
        try:
            ast.parse(mutant.apply(text))
        except SyntaxError:
            return  # a site this simple splicing cannot mutate validly
        found.append(mutant)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            flipped = _FLIPS.get(type(node.ops[0]))
            if flipped is not None:
                left = ast.get_source_segment(text, node.left)
                right = ast.get_source_segment(text, node.comparators[0])
                add(node, f"{left} {flipped} {right}", f"comparison -> {flipped}")
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            parts = [ast.get_source_segment(text, v) for v in node.values]
            other = "or" if isinstance(node.op, ast.And) else "and"
            add(node, f"({parts[0]}) {other} ({parts[1]})", f"-> {other}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add(node, f"({ast.get_source_segment(text, node.operand)})", "drop not")
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            add(node, str(not node.value), f"{node.value} -> {not node.value}")
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            add(node, str(node.value + 1), f"{node.value} -> {node.value + 1}")
        elif isinstance(node, ast.Return) and node.value is not None:
            segment = ast.get_source_segment(text, node.value)
            if segment != "None":
                add(node, "return None", "return None")
        elif (
            isinstance(node, ast.Expr | ast.Assign | ast.AugAssign | ast.AnnAssign)
            and id(node) not in skip
            and node.col_offset > 0  # inside a function or class, not module set-up
            and isinstance(getattr(node, "value", None), ast.AST)
        ):
            add(node, "pass", "statement -> pass")
    return found


def _copy_project(into: Path) -> None:
    ignore = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".coverage*", "*.egg-info")
    for name in ("dsh", "plugins", "tests", "examples", "pyproject.toml", "README.md", "docs"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=ignore)
        else:
            shutil.copy2(source, into / name)


def run_mutant(mutant: Mutant, workdir: Path, timeout: int) -> tuple[Mutant, str]:
    target = workdir / mutant.path
    original = (ROOT / mutant.path).read_text(encoding="utf-8")
    target.write_text(mutant.apply(original), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{workdir}{os.pathsep}{workdir / 'plugins'}"}
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-x",
                "-q",
                "-p",
                "no:cacheprovider",
                "--timeout",
                "30",
                *TARGETS[mutant.path],
            ],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        verdict = "survived" if done.returncode == 0 else "killed"
    except subprocess.TimeoutExpired:
        verdict = "killed (timeout)"
    finally:
        target.write_text(original, encoding="utf-8")
    return mutant, verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=150, help="mutants to sample")
    parser.add_argument("--seed", type=int, default=2026, help="sampling seed")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per mutant")
    parser.add_argument("--only", help="mutate only this file")
    args = parser.parse_args()
    paths = [args.only] if args.only else list(TARGETS)
    sites = [m for path in paths for m in mutants_of(path)]
    chosen = random.Random(args.seed).sample(sites, min(args.count, len(sites)))
    print(f"{len(sites)} mutation sites in {len(paths)} files; running {len(chosen)}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="dsh-mutation-"))
    workdirs = [base / f"w{i}" for i in range(args.jobs)]
    for workdir in workdirs:
        workdir.mkdir()
        _copy_project(workdir)
    free = list(workdirs)
    results: list[tuple[Mutant, str]] = []

    def one(mutant: Mutant) -> tuple[Mutant, str]:
        workdir = free.pop()
        try:
            return run_mutant(mutant, workdir, args.timeout)
        finally:
            free.append(workdir)

    with ThreadPoolExecutor(args.jobs) as pool:
        for mutant, verdict in pool.map(one, chosen):
            results.append((mutant, verdict))
            print(f"{verdict:18} {mutant.path}:{mutant.line}  {mutant.what}", flush=True)
    shutil.rmtree(base)
    killed = sum(1 for _, verdict in results if verdict.startswith("killed"))
    print(f"\nkilled {killed} of {len(results)} ({100 * killed / max(len(results), 1):.1f}%)")
    for mutant, verdict in results:
        if verdict == "survived":
            print(f"  survived: {mutant.path}:{mutant.line}  {mutant.what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
