"""``dsh run FILE [-p PROMPT] [--agent ID] [--resume SESSION_ID] [--yes]``: talk to the agent."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dsh import Command, CommandError, Context, Fiber, run_deployment_command

from ._service import StdioAgent

__all__ = ["command"]


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)
    parser.add_argument("-p", "--prompt", help="send one message, print the answer, exit")
    parser.add_argument("--agent", metavar="ID", help="the agent to talk to")
    parser.add_argument(
        "--resume", metavar="SESSION_ID", help="continue a stored session (see dsh sessions)"
    )
    parser.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="allow every action the approval service would ask about (also with -p)",
    )


async def _resume(root: Context, path: Path, session_id: str, agent_id: str | None) -> str:
    agents = root.get("agents")
    if agents is None:
        raise CommandError(f"{path}: --resume needs agents (load agent-core)")
    agent = await agents.resume(session_id, agent_id)
    turns = agent.session.last_turn()
    print(
        f"resumed session {session_id} ({turns} turn{'s' if turns != 1 else ''}) "
        f'as agent "{agent.id}"',
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


def _run(args: argparse.Namespace) -> int:
    path: Path = args.file

    async def talk(root: Context, deployment: Fiber) -> int:
        agent_id: str | None = args.agent
        if args.resume is not None:
            agent_id = await _resume(root, path, args.resume, agent_id)
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
        # Only when given: a front-end without approvals keeps the plain signature.
        extra = {"assume_yes": True} if args.yes else {}
        status: int = await frontend.run(agent_id=agent_id, prompt=args.prompt, **extra)
        return status

    return run_deployment_command(path, talk)


#: ``dsh run``, published in the ``dsh.commands`` entry-point group.
command = Command(
    help="chat with the deployment's agent (REPL, or -p once)",
    configure=_configure,
    run=_run,
)
