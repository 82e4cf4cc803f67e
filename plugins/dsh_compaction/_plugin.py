"""The ``compaction`` service: summarise the older history when the context fills up."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from contextlib import aclosing
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from dsh import CheckReport, ConfigError, Context, Service
from dsh_agent import Agent, NoModelError
from dsh_llm import BlockAssembler, LlmFailure, LlmRequest, Message, Usage
from dsh_session import Session
from dsh_slash_commands import SlashCommand, SlashInvocation

from ._history import CHECKPOINT_EVENT, History, Plan

__all__ = [
    "INSTRUCTION",
    "NOTHING_TO_COMPACT",
    "Compaction",
    "CompactionConfig",
    "describe",
]

_log = logging.getLogger("dsh.compaction")

#: What ``compact`` answers when the history has nothing older than what it keeps.
NOTHING_TO_COMPACT = "No compactable history yet."

#: The instruction that follows the older history in the summary request.
INSTRUCTION = """\
The conversation above is about to be removed from your context; the summary you write \
now replaces it, and the work continues from the summary alone. Write it with these five \
Markdown sections, in this order:

## Request
What the user asked for and every requirement, constraint or preference they stated, \
in their own words where the wording matters.

## Files
Every file read, created or changed: its path, what it holds or what was changed, and \
what still matters about it.

## Errors
Each error or failed attempt, its cause, and whether and how it was fixed.

## Pending work
What was asked for and is not done yet.

## Next step
The very next action to take, precisely enough to take it without asking.

If the conversation starts with an earlier summary (in <compacted-summary> tags), carry \
over everything in it that still matters. Be complete and concrete (names, paths, \
commands, numbers) and leave out pleasantries. Answer with the summary only."""


#: The most ``max_tokens`` a summary request gets by default.
_SUMMARY_TOKENS = 8192


class CompactionConfig(BaseModel):
    """Config of the ``compaction`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: The model's context window in tokens; None: what its adapter declares.
    context_window: int | None = Field(default=None, gt=0)
    #: Compact when the last step's prompt passes this share of the window.
    threshold_ratio: float = Field(default=0.8, gt=0, le=1)
    #: The recent turns kept whole may fill this share of the window (an estimate).
    retain_ratio: float = Field(default=0.16, gt=0, lt=1)
    #: ``max_tokens`` of the summary request; None: ``min(8192, window // 4)`` of the
    #: window in use.
    summary_max_tokens: int | None = Field(default=None, gt=0)
    #: Tool results of earlier turns longer than this (characters) are cut in requests;
    #: None: never.
    prune_tool_results_over: int | None = Field(default=8192, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> CompactionConfig:
        window = self.context_window
        summary = self.summary_max_tokens
        if window is not None and summary is not None and window < summary:
            raise ValueError(
                f"context_window ({window}) is smaller than summary_max_tokens "
                f"({summary}): the summary could not fit"
            )
        if self.retain_ratio >= self.threshold_ratio:
            raise ValueError(
                f"retain_ratio ({self.retain_ratio}) must be below threshold_ratio "
                f"({self.threshold_ratio}): the kept turns alone would pass the threshold"
            )
        return self

    def summary_tokens(self, window: int) -> int:
        """``max_tokens`` of a summary request for a model whose window is ``window``:
        ``summary_max_tokens``, else ``min(8192, window // 4)`` (at least 1)."""
        if self.summary_max_tokens is not None:
            return self.summary_max_tokens
        return max(1, min(_SUMMARY_TOKENS, window // 4))


def _span(numbers: tuple[int, ...]) -> str:
    if len(numbers) == 1:
        return f"turn {numbers[0]}"
    return f"turns {numbers[0]}-{numbers[-1]}"


def describe(plan: Plan, summary: str) -> str:
    """The one line that reports a compaction (what ``/compact`` prints)."""
    parts = []
    if plan.resummarised:
        parts.append("the earlier summary")
    if plan.summarised:
        parts.append(_span(plan.summarised))
    what = " and ".join(parts) or "the earlier messages"
    kept = f"kept {_span(plan.retained)}" if plan.retained else "no turn kept whole"
    tokens = -(-len(summary) // 4)  # the estimate: characters / 4, rounded up
    size = f"{tokens:,} token{'' if tokens == 1 else 's'}"
    return f"Compacted {what} into a summary of about {size}; {kept}."


class _Failed(Exception):
    """The summary request failed or came back empty (internal)."""


@dataclasses.dataclass(slots=True)
class _State:
    history: History
    lock: anyio.Lock


class Compaction(Service):
    """Keeps each agent's requests within the context window (ctx key ``compaction``).

    Before every request of an agent (the ``agent/request`` waterfall) it sends the
    compacted history, and compacts first when the last step's prompt passed the
    threshold; after a ``CONTEXT_LENGTH`` refusal (``agent/request-failed``) it
    compacts and asks for the one retry.
    """

    key = "compaction"
    name = "compaction"
    Config = CompactionConfig
    inject = ("agents", "llm", "sessions", "slash_commands")

    def __init__(self, ctx: Context, config: CompactionConfig) -> None:
        super().__init__(ctx, config)
        self._states: dict[Session, _State] = {}

    def setup(self) -> Iterator[Callable[[], object]]:
        ctx = self.ctx
        # Durable when written: a crash right after a compaction keeps its summary.
        yield ctx.sessions.declare_event_types(CHECKPOINT_EVENT, durable=True)
        yield ctx.on("agent/request", self._request)
        yield ctx.on("agent/request-failed", self._failed)
        yield ctx.on("session/disposed", self._forget)
        yield ctx.on("deployment/check", self._check)
        yield ctx.slash_commands.register(
            SlashCommand(
                name="compact",
                description="summarise the older history now",
                run=self._slash_compact,
            )
        )
        yield self._states.clear

    async def _slash_compact(self, invocation: SlashInvocation) -> None:
        """``/compact``: :meth:`compact` the front-end's agent and show its line (an
        error is shown by the registry)."""
        invocation.reply(await self.compact(invocation.agent))

    # -- the public API -----------------------------------------------------------------

    def context_window(self, model: str) -> int:
        """The context window used for ``model``: the config's, else what its adapter
        declares. Raises :class:`dsh.ConfigError` when neither gives one, or when the
        declared one is smaller than a ``summary_max_tokens`` the config sets."""
        config = self.config
        if config.context_window is not None:
            window: int = config.context_window
            return window
        declared: int | None = self.home_ctx.llm.context_window(model)
        if declared is None:
            raise ConfigError(
                f'compaction: no context window is known for model "{model}" (its adapter '
                "declares none); set context_window in the compaction config"
            )
        if declared < config.summary_tokens(declared):
            raise ConfigError(
                f'compaction: the context window of model "{model}" ({declared} tokens) is '
                f"smaller than summary_max_tokens ({config.summary_max_tokens})"
            )
        return declared

    async def find_context_window(self, model: str) -> int:
        """:meth:`context_window`, after the adapter was given the chance to find the
        window (``llm-openai`` asks its server once, RFC 0030) when nothing gives one
        without asking. Raises as :meth:`context_window` does."""
        if self.config.context_window is None and self.home_ctx.llm.context_window(model) is None:
            await self.home_ctx.llm.find_context_window(model)
        return self.context_window(model)

    def history(self, session: Session) -> list[Message]:
        """The messages the next request of ``session``'s agent would carry: after a
        checkpoint, the summary message and the turns kept since; tool results of
        ended turns pruned."""
        history = self._state(session).history
        history.sync(session)
        return list(history.messages())

    async def compact(self, agent: Agent) -> str:
        """Compact ``agent``'s history now, whatever its size (``/compact``); returns
        the line to print: :data:`NOTHING_TO_COMPACT`, the turns summarised, or why
        the summary failed (then the history is unchanged and a warning is logged).

        Raises :class:`dsh_agent.NoModelError` for an agent without a model and
        :class:`dsh.ConfigError` when no context window is known for it.
        """
        model = agent.model
        if not model:
            raise NoModelError(f'agent "{agent.id}" has no model to write the summary')
        window = await self.find_context_window(model)
        state = self._state(agent.session)
        async with state.lock:
            state.history.sync(agent.session)
            line, _ = await self._compact(agent.session, state.history, model, window)
        return line

    # -- listeners ----------------------------------------------------------------------

    def _state(self, session: Session) -> _State:
        state = self._states.get(session)
        if state is None:
            history = History(self.config.prune_tool_results_over)
            state = self._states[session] = _State(history, anyio.Lock())
        return state

    def _forget(self, session: Session) -> None:
        self._states.pop(session, None)

    async def _request(self, agent: Agent, request: LlmRequest, call_next: Any) -> LlmRequest:
        request = await call_next()
        if not request.model:  # the loop refuses it (NO_MODEL)
            return request
        window = await self.find_context_window(request.model)
        session = agent.session
        state = self._state(session)
        history = state.history
        limit = self.config.threshold_ratio * window
        history.sync(session)
        if (history.prompt_tokens or 0) > limit:
            # The slow path takes the lock (a /compact may be running) and looks again.
            async with state.lock:
                history.sync(session)
                if (history.prompt_tokens or 0) > limit:
                    await self._compact(session, history, request.model, window)
                    history.sync(session)
        return dataclasses.replace(request, messages=history.messages())

    async def _failed(self, agent: Agent, request: LlmRequest, failure: LlmFailure) -> bool | None:
        if failure.code != "CONTEXT_LENGTH":
            return None
        window = await self.find_context_window(request.model)
        session = agent.session
        state = self._state(session)
        async with state.lock:
            state.history.sync(session)
            _, compacted = await self._compact(session, state.history, request.model, window)
        return True if compacted else None

    async def _check(self, report: CheckReport) -> None:
        """``dsh check``: a context window is known for every agent's model (asking the
        server, as the first request would, when only it can say)."""
        for agent in self.ctx.agents.list():
            if agent.model is None or report.agent not in (None, agent.id):
                continue
            try:
                await self.find_context_window(agent.model)
            except ConfigError as exc:
                report.fail(f'{report.path}: agent "{agent.id}": {exc}')

    # -- compacting ---------------------------------------------------------------------

    async def _compact(
        self, session: Session, history: History, model: str, window: int
    ) -> tuple[str, bool]:
        """Summarise what :meth:`History.plan` gives up and append the checkpoint; the
        line describing the outcome and whether a checkpoint was appended. The caller
        holds the session's lock and has synced ``history``."""
        plan = history.plan(4 * self.config.retain_ratio * window, len(session.events))
        if plan is None:
            return NOTHING_TO_COMPACT, False
        request = LlmRequest(
            model=model,
            messages=(*history.summary_input(plan), Message.user(INSTRUCTION)),
            max_tokens=self.config.summary_tokens(window),
            session_id=session.id,
        )
        try:
            summary, usage = await self._summarise(request)
        except Exception as exc:  # a failed call, an empty answer, a listener's error
            reason = str(exc) or type(exc).__name__
            _log.warning(
                "compaction of session %s failed: %s; the history is unchanged",
                session.id,
                reason,
            )
            return f"Compaction failed: {reason}; the history is unchanged.", False
        data: dict[str, Any] = {"summary": summary, "first_kept_seq": plan.first_kept_seq}
        if usage is not None:
            data["usage"] = usage.to_json()
        session.append(CHECKPOINT_EVENT, data)
        return describe(plan, summary), True

    async def _summarise(self, request: LlmRequest) -> tuple[str, Usage | None]:
        assembler = BlockAssembler()
        async with aclosing(self.home_ctx.llm.stream(request)) as chunks:
            async for chunk in chunks:
                assembler.push(chunk)
        result = assembler.result()
        failure = result.finish.failure
        if failure is not None:
            raise _Failed(f"the summary request failed: {failure.message} ({failure.code})")
        summary = result.message.text.strip()
        if not summary:
            raise _Failed("the model returned an empty summary")
        return summary, result.usage
