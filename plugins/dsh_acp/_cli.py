"""``dsh acp FILE``: serve the deployment's agent to an editor over ACP on stdio."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dsh import Command, CommandError, Context, Fiber, run_deployment_command

from ._service import AcpFrontend

__all__ = ["command", "frontend_for"]


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)


async def frontend_for(root: Context, path: Path) -> AcpFrontend:
    """The deployment's ``acp`` front-end, started when the deployment has none.

    Raises :class:`dsh.CommandError` when it cannot start (no agents or sessions) or
    when the deployment has another front-end (``stdio-agent``).
    """
    frontend = root.get("frontend")
    if frontend is None:
        # PENDING (returns at once) when the deployment starts no agents.
        await root.plugin(AcpFrontend)
        frontend = root.get("frontend")
        if frontend is None:
            raise CommandError(
                f"{path}: there is no agent to serve (the deployment does not load "
                "agent-core, or the agents and sessions services)"
            )
    if not isinstance(frontend, AcpFrontend):
        other = getattr(frontend, "name", type(frontend).__name__)
        raise CommandError(
            f'{path}: the deployment has another front-end ("{other}"); dsh acp serves '
            "the acp front-end: remove that entry (or replace it with `name: acp`)"
        )
    return frontend


def _claim_stdio() -> tuple[int, int]:
    """Keep stdin and stdout for the protocol alone (:class:`dsh.CommandError` when
    either is closed).

    Returns the protocol's input and output (duplicates of file descriptors 0 and 1,
    which children do not inherit), then points descriptor 0 at the null device and
    descriptor 1 at stderr: whatever else would read stdin or write stdout — a
    ``print``, a plugin, a child process, a C library — can neither take protocol
    input nor corrupt the frames.
    """
    for fd, name in ((0, "stdin"), (1, "stdout")):
        try:
            os.fstat(fd)
        except OSError:
            raise CommandError(
                f"dsh acp: {name} is closed; the protocol runs on stdin and stdout (an "
                "editor connects them to pipes; a file or /dev/null works too)"
            ) from None
    sys.stdout.flush()
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return protocol_in, protocol_out


def _run(args: argparse.Namespace) -> int:
    path: Path = args.file
    protocol_in, protocol_out = _claim_stdio()

    async def serve(root: Context, deployment: Fiber) -> int:
        frontend = await frontend_for(root, path)
        # The protocol package is imported once there is a client to serve.
        from ._stdio import StdioTransport

        transport = StdioTransport(protocol_in, protocol_out, frontend.home_ctx.logger)
        status: int = await frontend.run(transport)
        return status

    return run_deployment_command(path, serve)


#: ``dsh acp``, published in the ``dsh.commands`` entry-point group.
command = Command(
    help="serve the deployment's agent to an editor over the Agent Client Protocol (stdio)",
    configure=_configure,
    run=_run,
)
