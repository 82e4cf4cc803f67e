"""The ``AcpFrontend`` service: the deployment's agent, served to an editor over ACP.

Nothing here imports the ``agent-client-protocol`` package: it is loaded when a client
is served (``run``, ``open_agent``), so loading a deployment stays cheap.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict

from dsh import Context, DshError, Service
from dsh_agent import Agent

if TYPE_CHECKING:
    from acp import Client

    from ._agent import AcpAgent

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "AcpArgumentError",
    "AcpError",
    "AcpFrontend",
    "AcpFrontendConfig",
]

#: ``run`` served its client until the end of its input.
EXIT_OK = 0
#: ``run`` could not start: there is no agent to model the sessions on.
EXIT_FAILED = 1

#: The JSON-RPC error codes requests are refused with.
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class AcpError(DshError, RuntimeError):
    """An ACP request cannot be served now: a prompt is already running in the session,
    there is no agent to model sessions on, the deployment stores no sessions to load.
    Answered with the JSON-RPC error :attr:`rpc_code` and this message."""

    code = "ACP"
    #: The JSON-RPC error code of the answer (``-32600``, invalid request).
    rpc_code = INVALID_REQUEST


class AcpArgumentError(AcpError, ValueError):
    """An ACP request carries an unusable value: a relative or missing ``cwd``, an
    unknown session id, prompt content dsh does not accept. JSON-RPC ``-32602``."""

    code = "ACP_ARGUMENT"
    rpc_code = INVALID_PARAMS


class AcpFrontendConfig(BaseModel):
    """Config of the ``acp`` front-end."""

    model_config = ConfigDict(extra="forbid")

    #: The declared agent each ACP session is modelled on (its model and max_tokens);
    #: default: the only declared agent.
    agent: str | None = None
    #: The persona of the sessions' agents (their ``deployment:persona`` section);
    #: None: the deployment's global persona.
    persona: str | None = None


class AcpFrontend(Service):
    """Serves the deployment's agent to an ACP client (ctx key ``frontend``).

    Loading it starts nothing: ``dsh acp`` calls :meth:`run`. Each ACP session is one
    dsh agent with its own session, made like the template agent (see
    :meth:`template`) in the client's working directory.
    """

    key = "frontend"
    name = "acp"
    Config = AcpFrontendConfig
    inject = ("agents", "sessions", "slash_commands")

    def __init__(self, ctx: Context, config: AcpFrontendConfig) -> None:
        super().__init__(ctx, config)
        self._serving = False
        #: The ids of the agents serving ACP sessions now (never a template).
        self.session_agents: set[str] = set()

    def template(self) -> Agent:
        """The agent ACP sessions are modelled on: the configured ``agent``, else the
        only agent the deployment declares (agents serving ACP sessions do not count).

        Raises :class:`AcpError` naming the known agents when there is no such agent,
        none at all, or several and none is configured.
        """
        agents = self.home_ctx.agents
        known: list[Agent] = [a for a in agents.list() if a.id not in self.session_agents]
        ids = ", ".join(f'"{a.id}"' for a in known) or "(none)"
        wanted = self.config.agent
        if wanted is not None:
            agent: Agent | None = agents.get(wanted)
            if agent is None:
                raise AcpError(f'unknown agent "{wanted}"; known agents: {ids}')
            return agent
        if len(known) == 1:
            return known[0]
        if not known:
            raise AcpError("there is no agent to serve (declare one in agent-core)")
        raise AcpError(
            f"several agents are declared ({ids}): name the one to serve with the acp "
            'config key "agent"'
        )

    @asynccontextmanager
    async def open_agent(self, client: Client | None = None) -> AsyncIterator[AcpAgent]:
        """The ACP agent side, to connect to a client yourself (any transport of the
        ``agent-client-protocol`` package): an ``acp.Agent`` whose sessions are dsh
        agents. ``client`` is the connection to the client; an ``AgentSideConnection``
        sets it through ``on_connect``. While open it hears the sessions' events and
        answers the ``approval`` service's questions; leaving the block disposes every
        agent it made. One at a time: a second raises :class:`AcpError`.
        """
        from ._agent import AcpAgent

        if self._serving:
            raise AcpError("this acp front-end is already serving a client")
        self._serving = True
        try:
            agent = AcpAgent(self, client)
            async with agent.serving():
                yield agent
        finally:
            self._serving = False

    async def run(self, to_client: Any = None, from_client: Any = None) -> int:
        """Serve one client until the end of its input; returns the exit status.

        ``to_client``/``from_client`` are the ``asyncio`` writer and reader of the
        connection (or ``to_client`` alone an ``acp`` transport); by default the
        process's stdin and stdout. Returns :data:`EXIT_FAILED` (the reason on stderr)
        when there is no agent to serve, else :data:`EXIT_OK` once the input ended and
        every agent it made is disposed.
        """
        try:
            self.template()
        except AcpError as exc:
            sys.stderr.write(f"dsh acp: {exc}\n")
            return EXIT_FAILED
        import acp

        async with self.open_agent() as agent:
            # The agent offers only the methods it implements (typing.cast: acp.Agent
            # is a protocol of every method); the connection answers the others
            # "method not found".
            await acp.run_agent(cast("acp.Agent", agent), to_client, from_client)
        return EXIT_OK
