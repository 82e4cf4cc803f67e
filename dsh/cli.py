"""The ``dsh`` command line: a thin dispatcher over the installed commands.

``check`` and ``plugins`` are the core's; every other subcommand comes from the
``dsh.commands`` entry-point group (see :mod:`dsh._commands`). Only the command that
runs is imported, except for ``dsh --help`` (and a mistyped command), which lists them
all.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import types
import typing
from collections.abc import Sequence
from typing import Any

from ._check import counted
from ._commands import (
    COMMAND_GROUP,
    Command,
    CommandError,
    CommandLoadError,
    add_deployment_argument,
    deployment_file,
    installed_commands,
    load_command,
    run_deployment_command,
)
from ._context import Context
from ._entry_points import read_together
from ._fiber import Fiber
from ._plugin import plugin_spec
from ._pydantic_plugins import PYDANTIC_GROUP
from ._report import CheckReport
from ._resolve import ENTRY_POINT_GROUP, installed_plugins
from ._startup import collection_paused
from ._stderr import discard, print_stderr

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


class _StderrHandler(logging.StreamHandler[Any]):
    """Writes to ``sys.stderr`` as it is when a record comes, not as it was when the
    handler was made (a command may make stderr tolerant of a reader that went away,
    see ``tolerant_stderr``)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        del value  # always sys.stderr


def _configure_logging(verbose: bool) -> None:
    handler = _StderrHandler()
    handler.setFormatter(_BriefFormatter(verbose))
    logger = logging.getLogger("dsh")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False


# -- check ------------------------------------------------------------------------------


def _configure_check(parser: argparse.ArgumentParser) -> None:
    add_deployment_argument(parser)
    parser.add_argument("--agent", metavar="ID", help="check only that agent's prompt")


def _check(args: argparse.Namespace) -> int:
    path = deployment_file(args.file, "check")

    async def check(root: Context, deployment: Fiber) -> int:
        report = CheckReport(path, args.agent)
        for listener in root.events.event("deployment/check").listeners():
            try:
                result = listener.call((report,))
                if result is not None:
                    await result
            except Exception as exc:
                name = getattr(listener.fn, "__qualname__", repr(listener.fn))
                report.fail(f"{path}: the check {name} raised {type(exc).__name__}: {exc}")
        if not deployment.instance.fibers:
            report.warn(f"{path}: the deployment has no entries: it runs nothing")
        for line in report.warnings:
            print(f"warning: {line}", file=sys.stderr)
        if report.problems:
            print("\n".join(report.problems), file=sys.stderr)
            return 1
        entries = counted(len(deployment.instance.fibers), "plugin entry", "plugin entries")
        found = "".join(f", {phrase}" for phrase in report.passed)
        print(f"{path}: ok ({entries} active{found})")
        return 0

    return run_deployment_command(path, check)


# -- plugins ----------------------------------------------------------------------------


def _configure_plugins(parser: argparse.ArgumentParser) -> None:
    del parser  # no arguments


def _plugins(args: argparse.Namespace) -> int:
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
        if model is None or not model.model_fields:
            print("    (no config)")
            continue
        for key, field in model.model_fields.items():
            if field.is_required():
                default = "required"
            else:
                default = f"default {field.get_default(call_default_factory=True)!r}"
            print(f"    {key}: {_type_name(field.annotation)} ({default})")
    return 0


def _type_name(annotation: Any) -> str:
    """A config field's type as a user reads it: ``list[AgentSpec] | None``."""
    if annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    if origin is None:
        return getattr(annotation, "__name__", None) or repr(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in args)
    name = getattr(origin, "__name__", None) or repr(origin)
    return f"{name}[{', '.join(_type_name(arg) for arg in args)}]"


# -- dispatch ---------------------------------------------------------------------------

_CORE = {
    "check": Command("load a deployment and report every problem", _configure_check, _check),
    "plugins": Command(
        "list installed plugins and their config keys", _configure_plugins, _plugins
    ),
}


def _command_word(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _commands(argv: Sequence[str]) -> dict[str, Command | CommandLoadError]:
    """The commands the parser needs: the core's, plus the one ``argv`` names when
    it is installed, else every installed one (for help and for mistakes). A command
    that cannot load stands as its error, so it is listed and reported by name."""
    commands: dict[str, Command | CommandLoadError] = dict(_CORE)
    word = _command_word(argv)
    if word in _CORE:
        return commands
    installed = installed_commands()
    chosen = [installed[word]] if word in installed else list(installed.values())
    for entry_point in sorted(chosen, key=lambda ep: ep.name):
        if entry_point.name in _CORE:
            continue  # the core's own commands cannot be replaced
        try:
            commands[entry_point.name] = load_command(entry_point)
        except CommandLoadError as exc:
            commands[entry_point.name] = exc
    return commands


#: The distribution whose version ``dsh --version`` prints.
DISTRIBUTION = "dsh-harness"


def version() -> str:
    """The installed version of :data:`DISTRIBUTION` (``unknown`` when it is not
    installed, as when the sources run from a checkout without ``pip install``)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: the installed version is looked up only when it is asked for
    (reading the distribution's metadata is work every other command would pay)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        del namespace, values, option_string
        print(f"dsh {version()}")
        parser.exit()


def _common() -> argparse.ArgumentParser:
    """The options every command takes, before or after its name (``dsh -v run F`` and
    ``dsh run F -v``). Their default is ``SUPPRESS``, so a subcommand's parser, which
    runs second, does not reset what the main parser found."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="debug logs, tracebacks",
    )
    return common


def _parser(commands: dict[str, Command | CommandLoadError]) -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog="dsh",
        description="Run and inspect dsh deployments (YAML plugin lists).",
        parents=[common],
    )
    parser.add_argument(
        "--version", action=_VersionAction, nargs=0, help="show program's version number and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in sorted(commands.items()):
        if isinstance(command, CommandLoadError):
            broken = sub.add_parser(name, help=f"(cannot load: {command.brief})")
            broken.add_argument("rest", nargs=argparse.REMAINDER)
            continue
        command.configure(
            sub.add_parser(name, help=command.help, description=command.help, parents=[common])
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsh`` command; returns the exit status."""
    # The command, the plugins it loads and pydantic's plugins are found in one pass
    # over the installed distributions (docs/rfc/0050, docs/rfc/0055).
    with read_together(COMMAND_GROUP, ENTRY_POINT_GROUP, PYDANTIC_GROUP):
        return _main(sys.argv[1:] if argv is None else list(argv))


def _main(words: list[str]) -> int:
    with collection_paused():  # the command's code is imported
        commands = _commands(words)
        args = _parser(commands).parse_args(words)
    _configure_logging(getattr(args, "verbose", False))
    command = commands[args.command]
    if isinstance(command, CommandLoadError):
        print_stderr(f"dsh: {command}")
        return 1
    try:
        status = command.run(args)
        # What is still buffered is written now, where a closed pipe is caught, rather
        # than at the interpreter's exit, where it would print a traceback.
        sys.stdout.flush()
        return status
    except CommandError as exc:
        # A mistake found before any deployment was loaded (no FILE and no ./dsh.yml).
        print_stderr(str(exc))
        return 1
    except KeyboardInterrupt:
        # Ctrl-C before a front-end handles it (while loading the deployment).
        # Run by test_ctrl_c_while_loading, but coverage.py drops the line events of
        # a frame a KeyboardInterrupt left an event loop through (RFC 0008).
        print_stderr("interrupted")  # pragma: no cover - see the comment above
        return 130  # pragma: no cover - see the comment above
    except BrokenPipeError:
        # The reader went away (`dsh plugins | head`): stop quietly, as a shell tool
        # does. Point stdout at /dev/null so the interpreter's final flush is quiet too.
        discard(sys.stdout)
        return EXIT_BROKEN_PIPE
    except BaseExceptionGroup as group:
        # The same, raised in a task (a front-end writing the answer as it streams).
        _broken, rest = group.split(BrokenPipeError)
        if rest is not None:
            raise
        discard(sys.stdout)
        return EXIT_BROKEN_PIPE


#: The exit status when stdout's reader went away (128 + SIGPIPE, as a shell reports).
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
