"""``dsh acp FILE``: serve the deployment's agent to an editor over ACP on stdio."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import BinaryIO

from dsh import Command, CommandError, Context, Fiber, run_deployment_command

from ._service import AcpFrontend

__all__ = ["command", "frontend_for"]

#: The longest protocol line read (the ``agent-client-protocol`` package's default).
LINE_LIMIT = 50 * 1024 * 1024


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


def _claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """Keep stdin and stdout for the protocol alone.

    Returns the protocol's input and output (duplicates of file descriptors 0 and 1,
    which children do not inherit), then points descriptor 0 at the null device and
    descriptor 1 at stderr: whatever else would read stdin or write stdout — a
    ``print``, a plugin, a child process, a C library — can neither take protocol
    input nor corrupt the frames.
    """
    sys.stdout.flush()
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return os.fdopen(protocol_in, "rb", buffering=0), os.fdopen(protocol_out, "wb", buffering=0)


async def _streams(
    protocol_in: BinaryIO, protocol_out: BinaryIO
) -> tuple[asyncio.StreamWriter, asyncio.StreamReader]:
    """asyncio streams on the protocol's pipes: the ``agent-client-protocol`` package
    is asyncio-only and reads and writes through them (docs/rfc/0014)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), protocol_in)
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), protocol_out
    )
    return asyncio.StreamWriter(transport, protocol, None, loop), reader


def _run(args: argparse.Namespace) -> int:
    path: Path = args.file
    protocol_in, protocol_out = _claim_stdio()

    async def serve(root: Context, deployment: Fiber) -> int:
        frontend = await frontend_for(root, path)
        writer, reader = await _streams(protocol_in, protocol_out)
        status: int = await frontend.run(writer, reader)
        return status

    return run_deployment_command(path, serve)


#: ``dsh acp``, published in the ``dsh.commands`` entry-point group.
command = Command(
    help="serve the deployment's agent to an editor over the Agent Client Protocol (stdio)",
    configure=_configure,
    run=_run,
)
