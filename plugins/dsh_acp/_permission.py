"""Approvals over ACP: the ACP sessions' state and ``session/request_permission``.

:class:`Link` is one ACP session (its agent and what the client decided in it);
:func:`answer` is the approval responder's work: find the ACP session a tool call
belongs to and ask its client, offering :data:`PERMISSION_OPTIONS`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from acp import Client, RequestError
from acp.schema import PermissionOption, ToolCallUpdate

from dsh_agent import Agent
from dsh_approval import ALWAYS
from dsh_session import Session

from ._mapping import tool_kind

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "PERMISSION_OPTIONS",
    "REJECT_ONCE",
    "Link",
    "answer",
    "link_of",
]

_log = logging.getLogger("dsh.acp")

#: The option ids of a permission request.
ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"


def _options() -> list[PermissionOption]:
    return [
        PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once"),
        PermissionOption(option_id=ALLOW_ALWAYS, name="Always allow", kind="allow_always"),
        PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"),
    ]


#: What every ``session/request_permission`` offers: allow once, always allow (this
#: kind and title, for the rest of the session), reject.
PERMISSION_OPTIONS = tuple(_options())


@dataclass(eq=False)
class Link:
    """One ACP session: its agent and what the client decided in it."""

    id: str
    agent: Agent
    #: A ``session/prompt`` is running.
    busy: bool = False
    #: ``session/cancel`` came for the running prompt.
    cancelled: bool = False
    #: ``(kind, title)`` of the actions the user always allows in this session.
    allowed: set[tuple[str, str]] = field(default_factory=set)


def link_of(links: Mapping[str, Link], sessions: Any, call: Any) -> tuple[Link, bool] | None:
    """The ACP session (of ``links``) of ``call``'s agent, or of the nearest ancestor
    session in the store ``sessions`` (a subagent's), and whether it is the call's own."""
    agent = getattr(call, "agent", None)
    session: Session | None = None if agent is None else agent.session
    own = True
    while session is not None:
        link = links.get(session.id)
        if link is not None and link.agent.session is session:
            return link, own
        parent = session.header.meta.get("parent_session")
        session = sessions.get(parent) if isinstance(parent, str) else None
        own = False
    return None


async def answer(
    request: Any,
    found: tuple[Link, bool] | None,
    flush: Callable[[], Awaitable[None]],
    client: Callable[[], Client],
) -> bool | str:
    """Answer the approval ``request`` in the ACP session ``found`` (:func:`link_of`
    its call): ``session/request_permission`` to ``client()`` after ``flush()`` (every
    update queued before it); "always allow" is remembered for the request's kind and
    title in that session, and answers ``"always"`` (``dsh_permissions``, when loaded,
    persists a rule for it); a reject, a cancelled request or no session is a no."""
    if found is None:
        _log.warning("declined %r: the call belongs to no ACP session", request.title)
        return False
    link, own = found
    key = (request.kind, request.title)
    if key in link.allowed:
        return True
    await flush()
    call_id: str = request.call.id
    if own:
        tool_call = ToolCallUpdate(tool_call_id=call_id)
    else:
        tool_call = ToolCallUpdate(
            tool_call_id=f"{request.call.agent.session.id}/{call_id}",
            title=request.title,
            kind=tool_kind(request.kind),
            status="pending",
            raw_input={"detail": request.detail},
        )
    try:
        response = await client().request_permission(
            session_id=link.id, tool_call=tool_call, options=list(PERMISSION_OPTIONS)
        )
    except (ConnectionError, RequestError) as exc:
        _log.warning("declined %r: the permission request failed: %s", request.title, exc)
        return False
    outcome = response.outcome
    choice = getattr(outcome, "option_id", None)
    if choice == ALLOW_ALWAYS:
        link.allowed.add(key)
        return ALWAYS
    return choice == ALLOW_ONCE
