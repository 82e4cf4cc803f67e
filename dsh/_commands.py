"""Subcommands of the ``dsh`` command line, contributed through entry points.

The core owns ``check`` and ``plugins``. Every other subcommand is a :class:`Command`
that a package publishes in the ``dsh.commands`` entry-point group under the command's
name (``run = "dsh_stdio_agent._cli:command"``), so the command line imports no plugin
package of its own accord and a third-party package can add a command.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ._context import Context
from ._deployment import leave_out_unset_env, load_deployment
from ._entry_points import entry_points
from ._errors import DshError
from ._fiber import Fiber
from ._record import record
from ._shutdown import EXIT_TERMINATED, Shutdown
from ._startup import collection_paused
from ._stderr import flush_stdout, only_broken_pipes, print_stderr, tolerant_stderr

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "COMMAND_GROUP",
    "DEFAULT_DEPLOYMENT",
    "Command",
    "CommandError",
    "CommandLoadError",
    "add_deployment_argument",
    "deployment_file",
    "installed_commands",
    "load_command",
    "run_deployment_command",
]

COMMAND_GROUP = "dsh.commands"

#: The deployment a command loads when it is given no FILE (in the current directory).
DEFAULT_DEPLOYMENT = Path("dsh.yml")


class CommandError(DshError):
    """A mistake on the command line that a command reports (an unknown ``--agent``,
    say): printed to stderr, exit status 1."""

    code = "COMMAND"


class CommandLoadError(CommandError):
    """An entry point of the ``dsh.commands`` group cannot be used as a command;
    ``brief`` is the short reason ``dsh --help`` shows beside its name."""

    code = "COMMAND_LOAD"

    def __init__(self, message: str, brief: str) -> None:
        super().__init__(message)
        self.brief = brief


@record
class Command:
    """One ``dsh`` subcommand.

    ``help`` is the one line ``dsh --help`` shows; ``configure(parser)`` adds the
    command's arguments to its argparse subparser; ``run(args)`` carries it out and
    returns the exit status. The command's name is its entry point's name.
    """

    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def add_deployment_argument(parser: argparse.ArgumentParser) -> None:
    """The optional ``file`` argument of a command that loads a deployment (resolve it
    with :func:`deployment_file`)."""
    parser.add_argument(
        "file", type=Path, nargs="?", help=f"the deployment (default: ./{DEFAULT_DEPLOYMENT})"
    )


def deployment_file(given: Path | None, command: str) -> Path:
    """``given``, else :data:`DEFAULT_DEPLOYMENT` when it exists; else raises
    :class:`CommandError` naming ``dsh <command>`` (``main`` prints it, status 1)."""
    if given is not None:
        return given
    if DEFAULT_DEPLOYMENT.is_file():
        return DEFAULT_DEPLOYMENT
    raise CommandError(
        f"dsh {command}: no deployment file given and there is no ./{DEFAULT_DEPLOYMENT} "
        f"here (dsh {command} FILE)"
    )


def installed_commands() -> dict[str, EntryPoint]:
    """The entry points of the ``dsh.commands`` group, by command name (read afresh)."""
    return {ep.name: ep for ep in entry_points(COMMAND_GROUP)}


def load_command(entry_point: EntryPoint) -> Command:
    """Import the :class:`Command` an entry point names; raise :class:`CommandLoadError`
    naming the entry point when it cannot be imported or is not a ``Command``."""
    where = f'command "{entry_point.name}" ({entry_point.value})'
    try:
        command = entry_point.load()
    except Exception as exc:
        kind = type(exc).__name__
        raise CommandLoadError(f"{where} cannot load: {kind}: {exc}", kind) from exc
    if not isinstance(command, Command):
        kind = type(command).__name__
        raise CommandLoadError(f"{where} is {kind}, not a dsh.Command", "not a dsh.Command")
    return command


def run_deployment_command(
    path: str | os.PathLike[str],
    body: Callable[[Context, Fiber], Awaitable[int]],
    *,
    calls_no_model: str | None = None,
) -> int:
    """Run ``body(root, deployment)`` on the deployment at ``path``, loaded in a fresh
    root; returns ``body``'s exit status.

    ``calls_no_model`` names a command that needs nothing a model's ``!env`` variables
    hold (``"sessions"``): the deployment is loaded under :func:`leave_out_unset_env`
    and each entry left out is one warning line on stderr before ``body`` runs.

    The helper of commands that work on a deployment file: a :class:`DshError` raised
    while loading or by ``body`` is printed to stderr and the status is 1. The root (and
    so the deployment) is disposed before this returns.

    SIGTERM (in the main thread) starts the same orderly shutdown: ``body`` is
    cancelled, the root disposed (every running turn records its end), and the status
    is :data:`EXIT_TERMINATED`; a second SIGTERM, or a SIGINT, while it runs is ignored.
    Nothing written stops it: while the command runs, a write to stderr never fails (see
    :func:`tolerant_stderr`), and stdout's reader going away during the shutdown does
    not change the status (docs/rfc/0027).
    """

    async def command(shutdown: Shutdown) -> int:
        async with Context() as root:
            with shutdown.unwinding(), shutdown.scope:
                try:
                    deployment = await _load(path, root, calls_no_model)
                    return await body(root, deployment)
                except DshError as exc:
                    print_stderr(str(exc))
                    return 1
                except (BrokenPipeError, BaseExceptionGroup) as exc:
                    if not (shutdown.requested and only_broken_pipes(exc)):
                        raise
                    # stdout's reader went away while the shutdown ran.
        flush_stdout()
        return EXIT_TERMINATED  # only SIGTERM cancels the scope

    async def main() -> int:
        return await Shutdown().run(command)

    with tolerant_stderr():
        return anyio.run(main)


async def _load(path: str | os.PathLike[str], root: Context, calls_no_model: str | None) -> Fiber:
    if calls_no_model is None:
        with collection_paused():
            return await load_deployment(Path(path), root)
    with collection_paused(), leave_out_unset_env():
        deployment = await load_deployment(Path(path), root)
    for line in deployment.instance.left_out:
        print_stderr(
            f"warning: {line}: the entry is left out (dsh {calls_no_model} calls no model)"
        )
    return deployment
