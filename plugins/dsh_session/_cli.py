"""``dsh sessions [FILE]``: the sessions a deployment's persistence has stored."""

from __future__ import annotations

import argparse
import sys

from dsh import (
    Command,
    Context,
    Fiber,
    add_deployment_argument,
    deployment_file,
    run_deployment_command,
)

from ._describe import describe_session

__all__ = ["command"]


def _configure(parser: argparse.ArgumentParser) -> None:
    add_deployment_argument(parser)


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

    # Listing calls no model: a model's credentials need not be set.
    return run_deployment_command(path, list_sessions, calls_no_model="sessions")


#: ``dsh sessions``, published in the ``dsh.commands`` entry-point group.
command = Command(
    help="list the sessions the deployment has stored",
    configure=_configure,
    run=_run,
)
