"""``dsh sessions FILE``: the sessions a deployment's persistence has stored."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from dsh import Command, Context, Fiber, run_deployment_command

from ._store import StoredSession

__all__ = ["command", "describe_session"]


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)


def describe_session(item: StoredSession) -> str:
    """One line of ``dsh sessions``: id, last activity, turns, agent, model, cwd."""
    if item.error is not None:
        return f"{item.id}  unreadable: {item.error}"
    when = "-" if item.last_activity is None else _local_time(item.last_activity)
    meta = item.meta
    parts = [
        item.id,
        when,
        f"{item.turns} turn{'s' if item.turns != 1 else ''}",
        f"agent {meta.get('agent') or '-'}",
        f"model {meta.get('model') or '-'}",
    ]
    if item.cwd:
        parts.append(f"cwd {item.cwd}")
    if item.open:
        parts.append("last turn interrupted (closed on resume)")
    return "  ".join(parts)


def _local_time(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def _run(args: argparse.Namespace) -> int:
    path: Path = args.file

    async def list_sessions(root: Context, deployment: Fiber) -> int:
        store = root.get("sessions")
        if store is None or not root.events.event("session/list").listeners():
            print(
                f"{path}: no session persistence is configured (add session-jsonl)",
                file=sys.stderr,
            )
            return 1
        stored = store.stored()
        if not stored:
            print("no stored sessions")
        for item in stored:
            print(describe_session(item))
        return 0

    return run_deployment_command(path, list_sessions)


#: ``dsh sessions``, published in the ``dsh.commands`` entry-point group.
command = Command(
    help="list the sessions the deployment has stored",
    configure=_configure,
    run=_run,
)
