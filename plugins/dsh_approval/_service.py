"""The ``Approval`` service: a policy, one responder, and the questions tools ask."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, DshError, Service, hookspec
from dsh._record import record

__all__ = [
    "ALWAYS",
    "Approval",
    "ApprovalConfig",
    "ApprovalDeniedError",
    "ApprovalError",
    "ApprovalRequest",
    "ApprovalSpecs",
    "Responder",
]


@record
class ApprovalRequest:
    """One question: may the agent do this?

    ``kind`` says what it is (``"bash"``, ``"write"``, ``"edit"``, …), ``title`` is the
    short line a person is asked about (``Allow <title>?``), ``detail`` the longer
    text a front-end may show (the whole command, a diff), ``call`` the tool call that
    asks (a ``dsh_tools.ToolCall``; its ``agent`` is the calling agent), or None.
    ``always_ask`` makes the question reach a person even under ``policy: allow`` (an
    action that leaves a safeguard, such as an unsandboxed command); ``deny`` still
    declines it and, with no responder, the answer is no.
    """

    kind: str
    title: str
    detail: str = ""
    call: Any = None
    always_ask: bool = False


#: The answer that approves a request for good (RFC 0036): ``approval/always`` is
#: emitted, and a listener (``dsh_permissions``) remembers a rule for it.
ALWAYS = "always"

#: How a front-end answers: ``responder(request) -> bool | "always"`` (or an awaitable
#: of it).
Responder = Callable[[ApprovalRequest], bool | str | Awaitable[bool | str]]


class ApprovalError(DshError, RuntimeError):
    """A responder is already set, or a responder answered something that is not a bool."""

    code = "APPROVAL"


class ApprovalDeniedError(DshError, PermissionError):
    """The request was declined. Raised by :meth:`Approval.require`; a tool that lets it
    propagate returns ``Error: the user declined: <title>`` (policy ``deny``: ``Error:
    refused by the approval policy (deny): <title>``) with code ``APPROVAL_DENIED``."""

    code = "APPROVAL_DENIED"

    def __init__(self, request: ApprovalRequest, policy: str | None = None) -> None:
        #: The policy that refused it (``"deny"``), or None when it was asked.
        self.policy = policy
        who = (
            "the user declined" if policy is None else f"refused by the approval policy ({policy})"
        )
        super().__init__(f"{who}: {request.title}")
        self.request = request


class ApprovalSpecs:
    """The events owned by the approval service."""

    @hookspec
    def approval_always(self, request: ApprovalRequest) -> None:
        """The responder answered ``"always"``: approve such requests from now on (a
        listener persists a rule for ``request.call``). Emitted before
        ``approval/decided``."""

    @hookspec
    def approval_decided(self, request: ApprovalRequest, approved: bool, by: str) -> None:
        """A request was answered; ``by`` is ``"policy"``, ``"responder"`` or ``"hook"``
        (a ``tool/before`` listener settled the call's questions)."""


class ApprovalConfig(BaseModel):
    """Config of the ``approval`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: ``allow``: every request is approved without a question; ``ask``: the responder
    #: (the front-end) answers, and with no responder the answer is no; ``deny``: every
    #: request is declined.
    policy: Literal["allow", "ask", "deny"] = "allow"


class Approval(Service):
    """Answers approval requests by policy, or by asking the front-end (ctx key
    ``approval``)."""

    key = "approval"
    name = "approval"
    Config = ApprovalConfig
    hookspecs = ApprovalSpecs

    def __init__(self, ctx: Context, config: ApprovalConfig) -> None:
        super().__init__(ctx, config)
        self._responders: list[Responder] = []

    @property
    def remembers(self) -> bool:
        """Whether an ``"always"`` answer is remembered: someone listens to
        ``approval/always`` (a front-end offers that answer only then)."""
        return bool(self.home_ctx.events.event("approval/always").listeners())

    @property
    def policy(self) -> str:
        """The configured policy (``allow``, ``ask`` or ``deny``)."""
        policy: str = self.config.policy
        return policy

    def set_responder(self, responder: Responder) -> Disposer:
        """Answer ``ask`` requests with ``responder`` while the caller lives (one at a
        time: a second raises :class:`ApprovalError`); returns the exact disposer."""
        checked: object = responder
        if not callable(checked):
            raise ApprovalError(f"an approval responder must be callable, got {responder!r}")
        if self._responders:
            raise ApprovalError("an approval responder is already set (one front-end answers)")

        def body() -> Iterator[Callable[[], None]]:
            self._responders.append(responder)
            yield self._responders.clear

        return self.ctx.effect(body, label="approval responder")

    async def request(self, request: ApprovalRequest) -> bool:
        """Whether ``request`` is approved: by the policy, or (``ask``) by the
        responder; no responder means no. Emits ``approval/decided``. A responder's
        error propagates; cancellation of the caller cancels the question.

        A ``tool/before`` listener may have settled the call's questions already
        (``request.call.permission``, RFC 0036): ``"approved"`` (a person approved the
        call) approves every request of the call, ``"allow"`` every one but an
        ``always_ask`` one, whatever the policy (``by`` is ``"hook"``)."""
        permission = getattr(request.call, "permission", None)
        if permission == "approved" or (permission == "allow" and not request.always_ask):
            return self._decided(request, True, "hook")
        policy = self.policy
        if policy == "deny" or (policy == "allow" and not request.always_ask):
            return self._decided(request, policy == "allow", "policy")
        if not self._responders:
            return self._decided(request, False, "policy")
        answer: object = self._responders[0](request)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer == ALWAYS:
            self.home_ctx.emit("approval/always", request)
            answer = True
        if not isinstance(answer, bool):
            raise ApprovalError(
                f"the approval responder answered {answer!r} for {request.title!r}; "
                f'it must answer True, False or "{ALWAYS}"'
            )
        return self._decided(request, answer, "responder")

    async def require(self, request: ApprovalRequest) -> None:
        """:meth:`request`, raising :class:`ApprovalDeniedError` when declined (naming
        the policy when ``deny`` refused it)."""
        if not await self.request(request):
            raise ApprovalDeniedError(request, "deny" if self.policy == "deny" else None)

    def _decided(self, request: ApprovalRequest, approved: bool, by: str) -> bool:
        self.home_ctx.emit("approval/decided", request, approved, by)
        return approved
