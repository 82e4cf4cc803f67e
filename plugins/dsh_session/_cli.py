"""``dsh sessions [FILE]``: the sessions a deployment's persistence has stored."""

from __future__ import annotations

import argparse
import datetime
import sys

from dsh import (
    Command,
    Context,
    Fiber,
    add_deployment_argument,
    counted,
    deployment_file,
    run_deployment_command,
)

from ._store import StoredSession

__all__ = ["TITLE_CHARS", "command", "describe_session", "short_title"]

#: How many characters of the first user message ``dsh sessions`` shows.
TITLE_CHARS = 60


def _configure(parser: argparse.ArgumentParser) -> None:
    add_deployment_argument(parser)


def short_title(text: str, limit: int = TITLE_CHARS) -> str:
    """``text`` on one line (whitespace runs folded to one space), cut to ``limit``
    characters with ``…`` when longer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def describe_session(item: StoredSession) -> str:
    """One line of ``dsh sessions``: id, last activity, turns, tokens, agent, model,
    cwd, and the title (the first user message, shortened)."""
    if item.error is not None:
        return f"{item.id}  unreadable: {item.error}"
    when = "-" if item.last_activity is None else _local_time(item.last_activity)
    meta = item.meta
    usage = item.usage
    tokens = "-" if usage is None else f"{usage.input_tokens} in / {usage.output_tokens} out"
    parts = [
        item.id,
        when,
        counted(item.turns, "turn"),
        f"tokens {tokens}",
        f"agent {meta.get('agent') or '-'}",
        f"model {meta.get('model') or '-'}",
    ]
    if item.cwd:
        parts.append(f"cwd {item.cwd}")
    if item.open:
        parts.append("last turn interrupted (closed on resume)")
    title = short_title(item.title or "")
    if title:
        parts.append(f'"{title}"')
    return "  ".join(parts)


def _local_time(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def _run(args: argparse.Namespace) -> int:
    path = deployment_file(args.file, "sessions")

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
