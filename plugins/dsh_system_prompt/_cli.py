"""``dsh prompt [FILE] [--agent ID] [--json]``: exactly what the model would receive."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dsh import (
    Command,
    Context,
    DshError,
    Fiber,
    add_deployment_argument,
    deployment_file,
    run_deployment_command,
)

from ._views import model_view, select_agents

__all__ = ["command"]


def _configure(parser: argparse.ArgumentParser) -> None:
    add_deployment_argument(parser)
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.add_argument("--agent", metavar="ID", help="that agent's view")


def _run(args: argparse.Namespace) -> int:
    path = deployment_file(args.file, "prompt")

    async def show(root: Context, deployment: Fiber) -> int:
        chosen = select_agents(root, args.agent, every=False)
        if root.get("system_prompt") is None:
            print(f"{path}: no system-prompt plugin is loaded", file=sys.stderr)
            return 1
        agent = chosen[0] if chosen else None
        try:
            text, tools = await model_view(root, agent)
        except DshError as exc:
            print(exc, file=sys.stderr)
            known = select_agents(root, None, every=True)
            if agent is None and known:
                ids = ", ".join(f'"{a.id}"' for a in known)
                print(
                    f"(that is the global view; choose an agent with --agent: {ids})",
                    file=sys.stderr,
                )
            return 1
        listed = [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in tools
        ]
        if args.json:
            doc: dict[str, Any] = {"system": text, "tools": listed}
            if agent is not None:
                doc["agent"] = agent.id
            print(json.dumps(doc, indent=2))
            return 0
        print(text)
        print(f"\n--- tools ({len(listed)}) ---")
        for tool in listed:
            print(json.dumps(tool, indent=2))
        return 0

    # Showing the prompt calls no model: a model's credentials need not be set.
    return run_deployment_command(path, show, calls_no_model="prompt")


#: ``dsh prompt``, published in the ``dsh.commands`` entry-point group.
command = Command(
    help="print the system prompt and tools the model would receive",
    configure=_configure,
    run=_run,
)
