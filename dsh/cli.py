"""The ``dsh`` command line: ``run``, ``check``, ``prompt``, ``sessions``, ``plugins``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from ._context import Context
from ._deployment import load_deployment
from ._errors import DshError
from ._plugin import plugin_spec
from ._resolve import installed_plugins

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


def _configure_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_BriefFormatter(verbose))
    logger = logging.getLogger("dsh")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False


class _UsageError(Exception):
    """A command-line mistake (such as an unknown ``--agent``): printed, exit 1."""


def _select_agents(root: Context, agent_id: str | None, *, every: bool) -> list[Any]:
    """The agents a command looks at; ``[]`` means the global view.

    With ``agent_id``: that agent (unknown: :class:`_UsageError` listing the known
    ids). Without: every declared agent when ``every`` (check), else the only one
    when exactly one exists (prompt, run).
    """
    agents = root.get("agents")
    known: list[Any] = [] if agents is None else agents.list()
    if agent_id is not None:
        for agent in known:
            if agent.id == agent_id:
                return [agent]
        ids = ", ".join(f'"{a.id}"' for a in known) or "(none)"
        raise _UsageError(f'unknown agent "{agent_id}"; known agents: {ids}')
    if every or len(known) == 1:
        return known
    return []


async def _model_view(root: Context, agent: Any = None) -> tuple[str, list[Any]]:
    """The rendered system prompt and the ordered tools ``agent`` (None: the global
    view) would get now; the caller checks that a system prompt is loaded."""
    from dsh_system_prompt import render_prompt

    context = None if agent is None else root.agents.assemble_context_for(agent)
    assembly = await root.system_prompt.assemble(context)
    return render_prompt(assembly), assembly.tools


async def _check(path: Path, agent_id: str | None) -> int:
    async with Context() as root:
        try:
            deployment = await load_deployment(path, root)
            chosen = _select_agents(root, agent_id, every=True)
        except (DshError, _UsageError) as exc:
            print(exc, file=sys.stderr)
            return 1
        count = len(deployment.instance.fibers)
        if root.get("system_prompt") is None:
            print(f"{path}: ok ({count} plugin entries active)")
            return 0
        failures: list[str] = []
        rendered: list[str] = []
        for agent in chosen or [None]:
            of = "" if agent is None else f' of agent "{agent.id}"'
            try:
                _, tools = await _model_view(root, agent)
            except DshError as exc:
                failures.append(f"{path}: the system prompt{of} does not render: {exc}")
                continue
            name = "" if agent is None else f'"{agent.id}" '
            rendered.append(f"{name}({len(tools)} tools)")
        if failures:
            print("\n".join(failures), file=sys.stderr)
            return 1
        views = "" if not chosen else " for agents" if len(chosen) > 1 else " for agent"
        print(
            f"{path}: ok ({count} plugin entries active, prompt renders{views} "
            f"{', '.join(rendered)})"
        )
        return 0


async def _prompt(path: Path, as_json: bool, agent_id: str | None) -> int:
    async with Context() as root:
        try:
            await load_deployment(path, root)
            chosen = _select_agents(root, agent_id, every=False)
        except (DshError, _UsageError) as exc:
            print(exc, file=sys.stderr)
            return 1
        if root.get("system_prompt") is None:
            print(f"{path}: no system-prompt plugin is loaded", file=sys.stderr)
            return 1
        agent = chosen[0] if chosen else None
        try:
            text, tools = await _model_view(root, agent)
        except DshError as exc:
            print(exc, file=sys.stderr)
            known = _select_agents(root, None, every=True)
            if agent is None and known:
                ids = ", ".join(f'"{a.id}"' for a in known)
                print(
                    f"(that is the global view; choose an agent with --agent: {ids})",
                    file=sys.stderr,
                )
            return 1
        listed = [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in tools
        ]
        if as_json:
            doc: dict[str, Any] = {"system": text, "tools": listed}
            if agent is not None:
                doc["agent"] = agent.id
            print(json.dumps(doc, indent=2))
            return 0
        print(text)
        print(f"\n--- tools ({len(listed)}) ---")
        for tool in listed:
            print(json.dumps(tool, indent=2))
        return 0


async def _run(
    path: Path, prompt: str | None, agent_id: str | None, resume: str | None = None
) -> int:
    async with Context() as root:
        try:
            await load_deployment(path, root)
            if resume is not None:
                chosen = [await _resume(root, path, resume, agent_id)]
            else:
                chosen = _select_agents(root, agent_id, every=False)
        except (DshError, _UsageError) as exc:
            print(exc, file=sys.stderr)
            return 1
        frontend = root.get("frontend")
        if frontend is None:
            from dsh_stdio_agent import StdioAgent

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
        status: int = await frontend.run(agent_id=chosen[0].id if chosen else None, prompt=prompt)
        return status


async def _resume(root: Context, path: Path, session_id: str, agent_id: str | None) -> Any:
    agents = root.get("agents")
    if agents is None:
        raise _UsageError(f"{path}: --resume needs agents (load agent-core)")
    agent = await agents.resume(session_id, agent_id)
    turns = agent.session.last_turn()
    print(
        f"resumed session {session_id} ({turns} turn{'s' if turns != 1 else ''}) "
        f'as agent "{agent.id}"',
        file=sys.stderr,
    )
    return agent


async def _sessions(path: Path) -> int:
    async with Context() as root:
        try:
            await load_deployment(path, root)
        except DshError as exc:
            print(exc, file=sys.stderr)
            return 1
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
            print(_describe_session(item))
        return 0


def _describe_session(item: Any) -> str:
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
    import datetime

    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def _plugins() -> int:
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh", description="Run and inspect dsh deployments (YAML plugin lists)."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs, tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="load a deployment and report every problem")
    check.add_argument("file", type=Path)
    prompt = sub.add_parser(
        "prompt", help="print the system prompt and tools the model would receive"
    )
    prompt.add_argument("file", type=Path)
    prompt.add_argument("--json", action="store_true", help="one JSON document")
    prompt.add_argument("--agent", metavar="ID", help="that agent's view")
    check.add_argument("--agent", metavar="ID", help="check only that agent's prompt")
    run = sub.add_parser("run", help="chat with the deployment's agent (REPL, or -p once)")
    run.add_argument("file", type=Path)
    run.add_argument("-p", "--prompt", help="send one message, print the answer, exit")
    run.add_argument("--agent", metavar="ID", help="the agent to talk to")
    run.add_argument(
        "--resume", metavar="SESSION_ID", help="continue a stored session (see dsh sessions)"
    )
    sessions = sub.add_parser("sessions", help="list the sessions the deployment has stored")
    sessions.add_argument("file", type=Path)
    sub.add_parser("plugins", help="list installed plugins and their config keys")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dsh`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    _configure_logging(args.verbose)
    try:
        if args.command == "check":
            return anyio.run(_check, args.file, args.agent)
        if args.command == "prompt":
            return anyio.run(_prompt, args.file, args.json, args.agent)
        if args.command == "run":
            return anyio.run(_run, args.file, args.prompt, args.agent, args.resume)
        if args.command == "sessions":
            return anyio.run(_sessions, args.file)
    except KeyboardInterrupt:
        # Ctrl-C before a front-end handles it (while loading the deployment).
        print("interrupted", file=sys.stderr)
        return 130
    return _plugins()
