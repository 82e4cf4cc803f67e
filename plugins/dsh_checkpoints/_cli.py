"""``dsh rewind FILE --session ID --turn N`` and ``dsh checkpoints gc [FILE]``."""

from __future__ import annotations

import argparse
import os
import sys

from dsh import (
    Command,
    Context,
    DshError,
    Fiber,
    add_deployment_argument,
    deployment_file,
    leave_out_unset_env,
    run_deployment_command,
)

from ._slash import describe_restore

__all__ = ["gc_command", "rewind_command"]


def _service(root: Context, path: object) -> object:
    service = root.get("checkpoints")
    if service is None:
        print(f"{path}: the deployment does not load checkpoints", file=sys.stderr)
    return service


def _configure_rewind(parser: argparse.ArgumentParser) -> None:
    add_deployment_argument(parser)
    parser.add_argument("--session", required=True, help="the session (or the start of its id)")
    parser.add_argument("--turn", required=True, type=int, help="rewind to before this turn")
    parser.add_argument(
        "--force", action="store_true", help="overwrite files that changed since the turn"
    )


def _run_rewind(args: argparse.Namespace) -> int:
    path = deployment_file(args.file, "rewind")

    async def rewind(root: Context, deployment: Fiber) -> int:
        service = _service(root, path)
        if service is None:
            return 1
        try:
            found = root.sessions.find(args.session)
            agent = await root.agents.resume(found.id)
            done = await root.checkpoints.rewind(agent, args.turn, force=args.force)
        except DshError as exc:
            print(f"dsh rewind: {exc}", file=sys.stderr)
            return 1
        root.sessions.flush(done.session)
        print(describe_restore(done.restore))
        print(
            f"rewound session {found.id} to before turn {args.turn}: new session "
            f"{done.session.id} (continue it with dsh run --resume {done.session.id})"
        )
        return 0

    with leave_out_unset_env():
        return run_deployment_command(path, rewind)


def _configure_gc(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["gc"], help="gc: bound the store now")
    add_deployment_argument(parser)


def _run_gc(args: argparse.Namespace) -> int:
    path = deployment_file(args.file, "checkpoints")

    async def collect(root: Context, deployment: Fiber) -> int:
        service = _service(root, path)
        if service is None:
            return 1
        cwd = os.getcwd()
        here = [s for s in root.sessions.stored() if s.error is None and s.cwd in (None, cwd)]
        snapshots = [await root.sessions.snapshot(s.id) for s in here]
        done = root.checkpoints.gc(cwd, [s for s in snapshots if s is not None])
        print(
            f"{root.checkpoints.store_dir(cwd)}: removed {len(done.removed)} blob(s), "
            f"{done.freed} bytes; {done.kept} bytes kept"
        )
        return 0

    with leave_out_unset_env():
        return run_deployment_command(path, collect)


#: ``dsh rewind``, published in the ``dsh.commands`` entry-point group.
rewind_command = Command(
    help="restore a session's files to before a turn and continue in a new session",
    configure=_configure_rewind,
    run=_run_rewind,
)

#: ``dsh checkpoints gc``, published in the ``dsh.commands`` entry-point group.
gc_command = Command(
    help="bound the checkpoint store of this workspace now (gc)",
    configure=_configure_gc,
    run=_run_gc,
)
