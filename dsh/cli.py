"""The ``dsh`` command line: ``check``, ``prompt`` and ``plugins``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from ._context import Context
from ._deployment import load_deployment
from ._errors import DshError
from ._plugin import plugin_spec
from ._resolve import installed_plugins

__all__ = ["main"]


class _BriefFormatter(logging.Formatter):
    """One line per record; tracebacks only with ``-v``."""

    def __init__(self, verbose: bool) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.verbose = verbose

    def formatException(self, ei: Any) -> str:
        if self.verbose:
            return super().formatException(ei)
        return f"  {ei[0].__name__}: {ei[1]}"


def _configure_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_BriefFormatter(verbose))
    logger = logging.getLogger("dsh")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False


async def _model_view(root: Context) -> tuple[str, list[Any]] | None:
    """The rendered system prompt and the ordered tools, or None without a prompt."""
    prompt = root.get("system_prompt")
    if prompt is None:
        return None
    from dsh_system_prompt import render_prompt

    assembly = await prompt.assemble()
    return render_prompt(assembly), assembly.tools


async def _check(path: Path) -> int:
    async with Context() as root:
        try:
            deployment = await load_deployment(path, root)
        except DshError as exc:
            print(exc, file=sys.stderr)
            return 1
        try:
            view = await _model_view(root)
        except DshError as exc:
            print(f"{path}: the system prompt does not render: {exc}", file=sys.stderr)
            return 1
        count = len(deployment.instance.fibers)
        rendered = "" if view is None else f", prompt renders ({len(view[1])} tools)"
        print(f"{path}: ok ({count} plugin entries active{rendered})")
        return 0


async def _prompt(path: Path, as_json: bool) -> int:
    async with Context() as root:
        try:
            await load_deployment(path, root)
            view = await _model_view(root)
        except DshError as exc:
            print(exc, file=sys.stderr)
            return 1
        if view is None:
            print(f"{path}: no system-prompt plugin is loaded", file=sys.stderr)
            return 1
        text, tools = view
        listed = [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in tools
        ]
        if as_json:
            print(json.dumps({"system": text, "tools": listed}, indent=2))
            return 0
        print(text)
        print(f"\n--- tools ({len(listed)}) ---")
        for tool in listed:
            print(json.dumps(tool, indent=2))
        return 0


def _plugins() -> int:
    found = installed_plugins()
    if not found:
        print("no plugins are installed in the dsh.plugins entry-point group")
        return 0
    for name, ep in sorted(found.items()):
        try:
            spec = plugin_spec(ep.load(), name)
        except Exception as exc:
            print(f"{name}  ({ep.value})  cannot load: {type(exc).__name__}: {exc}")
            continue
        print(f"{name}  ({ep.value})")
        model = spec.config_model
        if model is None:
            print("    (no config)")
            continue
        for key, field in model.model_fields.items():
            default = "required" if field.is_required() else f"default {field.get_default()!r}"
            annotation = getattr(field.annotation, "__name__", None) or str(field.annotation)
            print(f"    {key}: {annotation} ({default})")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh", description="Run and inspect dsh deployments (YAML plugin lists)."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs, tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="load a deployment and report every problem")
    check.add_argument("file", type=Path)
    prompt = sub.add_parser(
        "prompt", help="print the system prompt and tools the model would receive"
    )
    prompt.add_argument("file", type=Path)
    prompt.add_argument("--json", action="store_true", help="one JSON document")
    sub.add_parser("plugins", help="list installed plugins and their config keys")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsh`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    _configure_logging(args.verbose)
    if args.command == "check":
        return anyio.run(_check, args.file)
    if args.command == "prompt":
        return anyio.run(_prompt, args.file, args.json)
    return _plugins()
