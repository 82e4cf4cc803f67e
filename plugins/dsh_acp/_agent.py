"""``AcpAgent``: the agent side of the Agent Client Protocol on dsh agents.

Each ACP session is one dsh agent with its own session (same id). The agent's
session events are mapped to session updates (``_mapping``) and sent in order by one
pump task (``_updates``); a prompt answers only once every update of its turn has been
sent. Approvals are asked of the client in the call's ACP session (``_permission``).
"""

from __future__ import annotations

import importlib.metadata
import itertools
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from acp import PROTOCOL_VERSION, Client, RequestError, update_agent_message_text
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SetSessionModeResponse,
)

from dsh import DshError
from dsh_agent import Agent
from dsh_session import Session, SessionEvent
from dsh_slash_commands import split_command

from ._mapping import (
    commands_update,
    mode_state,
    mode_update,
    prompt_text,
    session_updates,
    stop_reason,
)
from ._permission import Link, answer, link_of
from ._service import INTERNAL_ERROR, INVALID_PARAMS, AcpArgumentError, AcpError
from ._updates import UpdatePump

if TYPE_CHECKING:
    from ._service import AcpFrontend

__all__ = ["AcpAgent", "rpc_error"]

_log = logging.getLogger("dsh.acp")


def rpc_error(exc: DshError) -> RequestError:
    """The JSON-RPC error a request that raised ``exc`` is answered with: the error's
    message, its dsh code as data, and the code of an :class:`AcpError` (``-32602``
    for another ``ValueError``, else ``-32603``)."""
    if isinstance(exc, AcpError):
        code = exc.rpc_code
    else:
        code = INVALID_PARAMS if isinstance(exc, ValueError) else INTERNAL_ERROR
    return RequestError(code, str(exc), {"code": exc.code})


class AcpAgent:
    """The ``acp.Agent`` of an :class:`~dsh_acp.AcpFrontend` (see its ``open_agent``).

    Implements ``initialize``, ``session/new``, ``session/load``, ``session/prompt``
    and ``session/cancel``; other methods are not offered (the connection answers
    "method not found"). A dsh error a request raises is answered as a JSON-RPC error
    (:func:`rpc_error`).
    """

    def __init__(self, frontend: AcpFrontend, client: Client | None = None) -> None:
        self.frontend = frontend
        self.client = client
        self._home = frontend.home_ctx
        self._links: dict[str, Link] = {}
        self._ids = itertools.count(1)
        self._updates = UpdatePump(lambda: self._client)

    def on_connect(self, conn: Client) -> None:
        """The connection to the client (called by ``acp.AgentSideConnection``)."""
        self.client = conn

    # -- lifetime ----------------------------------------------------------------------

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Hear the sessions' events, answer approvals, send updates; on exit dispose
        every agent made for a session."""
        home = self._home
        # The pump runs in the runtime's task group (not one opened here, which would
        # wrap whatever the block raises in an exception group).
        pump = home.task(self._updates.run, label="acp session updates")
        stop = home.on("session/event", self._on_event)
        unlist = home.on("slash-commands/change", self._announce_all)
        unmode = (
            None
            if home.get("plan_mode") is None
            else home.on("plan-mode/change", self._mode_changed)
        )
        approval = home.get("approval")
        unanswer = None if approval is None else approval.set_responder(self._answer)
        try:
            yield
        finally:
            stop()
            unlist()
            if unmode is not None:
                unmode()
            if unanswer is not None:
                unanswer()
            with anyio.CancelScope(shield=True):
                for link in list(self._links.values()):
                    await link.agent.dispose()
                    self._forget(link)
                await pump()

    def _forget(self, link: Link) -> None:
        del self._links[link.id]
        self.frontend.session_agents.discard(link.agent.id)

    # -- updates -----------------------------------------------------------------------

    def _on_event(self, session: Session, event: SessionEvent) -> None:
        link = self._links.get(session.id)
        if link is None or link.agent.session is not session:
            return
        try:
            updates = session_updates(event, session.header.cwd)
        except Exception as exc:  # an observer never fails the turn it watches
            _log.error(
                "cannot show session event %s (%s) to the client",
                event.seq,
                event.type,
                exc_info=exc,
            )
            return
        for update in updates:
            self._updates.enqueue(link.id, update)

    def _announce(self, link: Link) -> None:
        """Tell the client the session's commands: exactly the registered ones."""
        self._updates.enqueue(link.id, commands_update(self._home.slash_commands.list()))

    def _announce_all(self) -> None:
        for link in self._links.values():
            self._announce(link)

    def _mode_changed(self, agent: Agent, active: bool) -> None:
        """Plan mode changed for ``agent`` (``/plan``, an approved plan): tell its
        session's client."""
        for link in self._links.values():
            if link.agent is agent:
                self._updates.enqueue(link.id, mode_update(active))

    def _modes(self, agent: Agent) -> Any:
        """The session's modes (``default``, ``plan``) with plan mode; else None."""
        plan_mode = self._home.get("plan_mode")
        return None if plan_mode is None else mode_state(plan_mode.active(agent))

    @property
    def _client(self) -> Client:
        client = self.client
        if client is None:
            raise AcpError("the ACP agent is not connected to a client")
        return client

    # -- requests ----------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Protocol version 1; ``loadSession`` when a persistence backend can open
        stored sessions; prompts of text, resource links and embedded text resources;
        no MCP servers from the client, no authentication."""
        can_load = bool(self._home.events.event("session/open").listeners())
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=can_load,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                mcp_capabilities=McpCapabilities(http=False, sse=False),
            ),
            auth_methods=[],
            agent_info=Implementation(
                name="dsh", title="dsh", version=importlib.metadata.version("dsh-harness")
            ),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        """A new dsh agent like the template, its session's cwd the client's ``cwd``
        (absolute, an existing directory); the ACP session id is its session's id."""
        try:
            await _check_cwd(cwd)
            _ignore_mcp_servers(mcp_servers)
            template = self.frontend.template()
            agent = self._home.agents.create(
                self._next_id(),
                model=template.model,
                cwd=cwd,
                persona=self.frontend.config.persona,
                max_tokens=template.max_tokens,
            )
        except DshError as exc:
            raise rpc_error(exc) from exc
        self._announce(self._link(agent))
        return NewSessionResponse(session_id=agent.session.id, modes=self._modes(agent))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        """Resume the stored session ``session_id`` on a new agent like the template
        (a turn the process died in is closed as interrupted), replay its history as
        session updates, then answer. The session keeps the cwd it was made with."""
        try:
            await _check_cwd(cwd)
            _ignore_mcp_servers(mcp_servers)
            if session_id in self._links:
                raise AcpError(f'session "{session_id}" is already open on this connection')
            if not self._home.events.event("session/open").listeners():
                raise AcpError(
                    "session/load: this deployment stores no sessions (load session-jsonl)"
                )
            template = self.frontend.template()
            session = await self._home.sessions.load(session_id)
            agent = self._home.agents.create(
                self._next_id(),
                model=template.model,
                persona=self.frontend.config.persona,
                session=session,
                max_tokens=template.max_tokens,
            )
            try:
                session.close_open_turn()
            except BaseException:
                await agent.dispose()
                raise
        except DshError as exc:
            raise rpc_error(exc) from exc
        if session.header.cwd != cwd:
            _log.warning(
                'session "%s" was made in %s; it stays there (the client asked for %s)',
                session_id,
                session.header.cwd,
                cwd,
            )
        link = self._link(agent)
        for event in session.events:
            for update in session_updates(event, session.header.cwd, live=False):
                self._updates.enqueue(link.id, update)
        await self._updates.flush()
        self._announce(link)
        return LoadSessionResponse(modes=self._modes(agent))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        """Run the prompt as one turn of the session's agent, streaming its updates;
        answer with the turn's stop reason once they are all sent. A turn that fails
        is answered with a JSON-RPC error (``-32603``, the turn's message, its code as
        data). A second prompt while one runs is refused. A prompt naming a registered
        slash command (``/name arguments``) runs that command instead (see
        :meth:`_run_command`)."""
        try:
            link = self._get(session_id)
            text = prompt_text(prompt)
            if link.busy:
                raise AcpError(
                    f'session "{session_id}" is already running a prompt; wait for its '
                    "answer or cancel it (session/cancel)"
                )
        except DshError as exc:
            raise rpc_error(exc) from exc
        link.busy, link.cancelled = True, False
        try:
            if self._names_command(text):
                reason, turn = await self._run_command(link, text)
            else:
                reason, turn = await self._run_turn(link, text)
        finally:
            link.busy = False
        stop = stop_reason(reason)
        if stop is None:
            assert reason is not None  # a turn that never ran is "cancelled"
            raise RequestError(
                INTERNAL_ERROR,
                f"the turn failed: {reason.get('message')}",
                {"code": reason.get("code"), "turn": turn},
            )
        return PromptResponse(stop_reason=stop)

    async def _run_turn(self, link: Link, text: str) -> tuple[Mapping[str, Any] | None, int]:
        """Send ``text`` as its own turn once the agent is idle; wait until it is idle
        again and every update is sent. Returns how the turn ended (None: it never ran)
        and its number."""
        agent = link.agent
        # Dropping this request does not cancel the turn (session/cancel does): when the
        # client goes away, the end of the connection disposes the agent, and the turn
        # ends "aborted"/"disposed".
        await agent.when_idle()
        turn = agent.session.last_turn() + 1
        if link.cancelled:
            return None, turn
        agent.send(text)
        await agent.when_idle()
        await self._updates.flush()
        return agent.session.turn_end(turn), turn

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        """``session/set_mode``: ``plan`` puts the session's agent in plan mode,
        ``default`` takes it out (the change is also sent as ``current_mode_update``).
        Without the plan-mode plugin, or for another mode, ``-32602``."""
        try:
            link = self._get(session_id)
            plan_mode = self._home.get("plan_mode")
            if plan_mode is None:
                raise AcpArgumentError(
                    "session/set_mode: this deployment has no modes (load plan-mode)"
                )
            if mode_id not in ("default", "plan"):
                raise AcpArgumentError(
                    f'session/set_mode: unknown mode "{mode_id}"; the modes: default, plan'
                )
        except DshError as exc:
            raise rpc_error(exc) from exc
        if mode_id == "plan":
            plan_mode.enter(link.agent)
        else:
            plan_mode.leave(link.agent)
        return SetSessionModeResponse()

    def _names_command(self, text: str) -> bool:
        parsed = split_command(text)
        return parsed is not None and self._home.slash_commands.get(parsed[0]) is not None

    async def _run_command(self, link: Link, text: str) -> tuple[Mapping[str, Any] | None, int]:
        """Run the slash command ``text``: what it replies is an agent message chunk,
        what it sends runs as a turn of the session's agent. Answers like the last
        turn it sent, else ``end_turn``."""
        ended: list[tuple[Mapping[str, Any] | None, int]] = []

        def reply(message: str) -> None:
            self._updates.enqueue(link.id, update_agent_message_text(message))

        async def send(message: str) -> None:
            ended.append(await self._run_turn(link, message))

        await self._home.slash_commands.dispatch(
            text, agent=link.agent, reply=reply, send=send, frontend="acp"
        )
        await self._updates.flush()
        return ended[-1] if ended else ({"kind": "completed"}, link.agent.session.last_turn())

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Cancel the session's running turn (it ends ``aborted``) and so its prompt,
        which answers ``cancelled``. Nothing running: nothing happens; an unknown
        session is logged."""
        link = self._links.get(session_id)
        if link is None:
            _log.info("session/cancel for an unknown session %s", session_id)
            return
        link.cancelled = True
        link.agent.cancel()

    def prompting(self, session_id: str) -> bool:
        """Whether a ``session/prompt`` of ``session_id`` is running."""
        link = self._links.get(session_id)
        return link is not None and link.busy

    # -- approvals ---------------------------------------------------------------------

    async def _answer(self, request: Any) -> bool | str:
        """The approval responder: :func:`~dsh_acp._permission.answer` in the ACP
        session the asking call belongs to (a subagent's: its root session's)."""
        found = link_of(self._links, self._home.sessions, request.call)
        return await answer(request, found, self._updates.flush, lambda: self._client)

    # -- sessions ----------------------------------------------------------------------

    def _next_id(self) -> str:
        agents = self._home.agents
        return next(i for i in (f"acp-{n}" for n in self._ids) if agents.get(i) is None)

    def _link(self, agent: Agent) -> Link:
        link = Link(agent.session.id, agent)
        self._links[link.id] = link
        self.frontend.session_agents.add(agent.id)
        return link

    def _get(self, session_id: str) -> Link:
        link = self._links.get(session_id)
        if link is None:
            raise AcpArgumentError(
                f'unknown session "{session_id}" (open it with session/new or session/load)'
            )
        return link


async def _check_cwd(cwd: str) -> None:
    if not os.path.isabs(cwd):
        raise AcpArgumentError(f'cwd must be an absolute path, got "{cwd}"')
    if not await anyio.Path(cwd).is_dir():
        raise AcpArgumentError(f'cwd "{cwd}" is not a directory')


def _ignore_mcp_servers(servers: list[Any] | None) -> None:
    if servers:
        _log.warning(
            "ignoring the %d MCP server(s) the client offered: dsh connects only the MCP "
            "servers its deployment declares",
            len(servers),
        )
