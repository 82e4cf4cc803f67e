"""``dsh run [FILE] [-p PROMPT] [-m MODEL] [--agent ID] [--resume ID | --continue]
[--output text|json] [--yes] [--watch]``: talk to the agent."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path
from typing import Any

from dsh import (
    Command,
    CommandError,
    Context,
    Fiber,
    add_deployment_argument,
    counted,
    deployment_file,
    run_deployment_command,
)

from ._service import OUTPUTS, StdioAgent

__all__ = ["command", "piped_stdin", "with_context"]


def _configure(parser: argparse.ArgumentParser) -> None:
    add_deployment_argument(parser)
    parser.add_argument(
        "-p",
        "--prompt",
        help="send one message, print the answer, exit; '-' reads the message from "
        "stdin; input piped with a PROMPT is added to it",
    )
    parser.add_argument("-m", "--model", help="the model the agent uses in this run")
    parser.add_argument("--agent", metavar="ID", help="the agent to talk to")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--resume",
        metavar="SESSION_ID",
        help="continue a stored session: its id or the start of it (see dsh sessions)",
    )
    which.add_argument(
        "-c",
        "--continue",
        dest="continue_newest",
        action="store_true",
        help="continue the stored session with the latest activity",
    )
    parser.add_argument(
        "--output",
        choices=OUTPUTS,
        default="text",
        help="json: the turn's session events as JSON lines on stdout (with -p or piped input)",
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        help="reload what changed when the deployment file or a file plugin is edited "
        "(hot-reload; needs the watch extra)",
    )
    parser.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="allow every action the approval service would ask about (also with -p)",
    )


def piped_stdin() -> str | None:
    """All of ``sys.stdin`` when it is a pipe or a regular file, else None (a terminal,
    ``/dev/null``, a closed stdin, a stand-in without a file descriptor)."""
    stdin = sys.stdin
    if stdin is None:
        return None
    try:
        mode = os.fstat(stdin.fileno()).st_mode
    except (OSError, ValueError):  # closed, or a stand-in (io.UnsupportedOperation is both)
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        return None
    text: str = stdin.read()
    return text


def with_context(prompt: str, piped: str) -> str:
    """The message of ``-p PROMPT`` with ``piped`` input: the prompt, a blank line, and
    the input between a ``<stdin>`` line and a ``</stdin>`` line (the prompt alone when
    the input is only whitespace)."""
    if not piped.strip():
        return prompt
    body = piped if piped.endswith("\n") else piped + "\n"
    return f"{prompt}\n\n<stdin>\n{body}</stdin>"


def _is_terminal(stream: Any) -> bool:
    return stream is not None and bool(stream.isatty())


async def _resume(root: Context, path: Path, args: argparse.Namespace) -> str:
    """Resume ``--resume``'s (or ``--continue``'s) session; the id of its agent."""
    flag = "--continue" if args.continue_newest else "--resume"
    agents = root.get("agents")
    store = root.get("sessions")
    if agents is None or store is None:
        raise CommandError(f"{path}: {flag} needs agents (load agent-core)")
    if args.continue_newest:
        newest = store.newest()
        if newest is None:
            raise CommandError(
                f"{path}: --continue: there is no stored session to continue "
                "(dsh sessions lists them)"
            )
        session_id: str = newest.id
    else:
        session_id = store.find(args.resume).id
    agent = await agents.resume(session_id, args.agent)
    turns = agent.session.last_turn()
    print(
        f'resumed session {session_id} ({counted(turns, "turn")}) as agent "{agent.id}"',
        file=sys.stderr,
    )
    for message in agent.session.unanswered(turns):
        print(
            f"the last turn ended before the model answered; its message is not part of "
            f"the conversation (send it again if you still want it): {message.text!r}",
            file=sys.stderr,
        )
    chosen: str = agent.id
    return chosen


def _message(prompt: str | None) -> str | None:
    """The one-shot message: ``prompt``, all of stdin for ``-``, else ``prompt`` with
    the piped input added (see :func:`with_context`)."""
    if prompt == "-":
        stdin = sys.stdin
        text: str = "" if stdin is None else stdin.read()
        return text
    if prompt is None:
        return None
    piped = piped_stdin()
    return prompt if piped is None else with_context(prompt, piped)


def _run(args: argparse.Namespace) -> int:
    path = deployment_file(args.file, "run")
    prompt = _message(args.prompt)
    if args.prompt == "-" and not (prompt or "").strip():
        print("dsh run: -p - read an empty message from stdin", file=sys.stderr)
        return 1

    async def talk(root: Context, deployment: Fiber) -> int:
        agent_id: str | None = args.agent
        if args.watch:
            from dsh_hot_reload import watch

            await watch(deployment)
        if args.resume is not None or args.continue_newest:
            agent_id = await _resume(root, path, args)
        frontend = root.get("frontend")
        if frontend is None:
            # PENDING (returns at once) when the deployment starts no agents.
            await root.plugin(StdioAgent)
            frontend = root.get("frontend")
            if frontend is None:
                print(
                    f"{path}: there is no agent to talk to (the deployment does not load "
                    "agent-core, or the agents/sessions/system-prompt services)",
                    file=sys.stderr,
                )
                return 1
        if not isinstance(frontend, StdioAgent):
            other = getattr(frontend, "name", type(frontend).__name__)
            raise CommandError(
                f'{path}: the deployment has another front-end ("{other}"); dsh run talks '
                "through stdio-agent: remove that entry (or run the command it is for, "
                "such as dsh acp)"
            )
        # Only what is asked for: a front-end that lacks a feature keeps the plain
        # signature `run(*, agent_id, prompt)` for the runs that do not use it.
        extra: dict[str, Any] = {}
        if args.yes:
            extra["assume_yes"] = True
        if args.model is not None:
            extra["model"] = args.model
        if args.output != "text":
            extra["output"] = args.output
        if prompt is not None or not _is_terminal(sys.stdin):
            extra["show_session"] = True
        status: int = await frontend.run(agent_id=agent_id, prompt=prompt, **extra)
        return status

    return run_deployment_command(path, talk)


#: ``dsh run``, published in the ``dsh.commands`` entry-point group.
command = Command(
    help="chat with the deployment's agent (REPL, or -p once)",
    configure=_configure,
    run=_run,
)
