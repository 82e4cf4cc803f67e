"""The ``hooks`` plugin: Claude Code command hooks on the agent loop's events."""

from __future__ import annotations

import functools
import json
import os
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from dsh import Context, Disposer, Plugin
from dsh_agent import HookDecision
from dsh_permissions import (
    claude_tool_input,
    claude_tool_name,
    load_settings,
    project_dir,
    settings_files,
)

from ._config import HookGroup, HooksConfig
from ._reply import Reply, read_reply
from ._runner import Outcome, run_hook
from ._settings import settings_hooks
from ._table import Hook, HookTable
from ._tool_input import from_tool_input

__all__ = ["Hooks"]

#: The events whose plain (not JSON) stdout is context for the model.
_PLAIN_CONTEXT = frozenset({"UserPromptSubmit", "SessionStart"})


def _joined(texts: Sequence[str]) -> str:
    return "\n".join(text for text in texts if text)


class Hooks(Plugin):
    """Runs command hooks in Claude Code's protocol on ``tool/before``, ``tool/after``,
    ``user/prompt``, ``turn/stop``, ``session/start`` and ``session/end``; it listens
    only to the events some hook needs."""

    name = "hooks"
    Config = HooksConfig
    inject = ("agents",)  # the owner of the loop events

    def __init__(self, ctx: Context, config: HooksConfig) -> None:
        super().__init__(ctx, config)
        given = config.project_dir
        start = Path(given).expanduser().resolve() if given else Path.cwd()
        #: Where hooks run (``CLAUDE_PROJECT_DIR``): as configured, else the project
        #: of the working directory (the nearest folder up with ``.claude``, ``.dsh``
        #: or ``.git``).
        self.project_dir = start if given else project_dir(start)
        groups: list[tuple[str, HookGroup]] = [
            (event, group) for event, found in config.hooks.items() for group in found
        ]
        if config.claude_settings:
            found = settings_files(start)
            groups += settings_hooks((file.path, load_settings(file.path)) for file in found)
        self.table = HookTable(groups, config.timeout)
        # PreToolUse additionalContext, read with the result (tool/after), by call; an
        # entry goes with its call when the call never reaches tool/after (a later
        # listener refused it, or its turn was cancelled).
        self._call_context: dict[int, tuple[weakref.ref[Any], str]] = {}
        # SessionStart context, added to the agent's first prompt.
        self._session_context: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        # The turn a Stop hook last kept going, by agent (``stop_hook_active``).
        self._continued: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def setup(self) -> Iterator[Disposer]:
        ctx, table = self.ctx, self.table
        if "PreToolUse" in table:
            # First, as in Claude Code (hooks before the permission rules): a guard
            # hook runs even for a call a rule or another plugin would allow.
            yield ctx.on("tool/before", self.tool_before, prepend=True)
        if "PreToolUse" in table or "PostToolUse" in table:
            yield ctx.on("tool/after", self.tool_after)
        if "UserPromptSubmit" in table or "SessionStart" in table:
            yield ctx.on("user/prompt", self.user_prompt)
        if "Stop" in table:
            yield ctx.on("turn/stop", self.turn_stop)
        if "SessionStart" in table:
            yield ctx.on("session/start", self.session_start)
        if "SessionEnd" in table:
            yield ctx.on("session/end", self.session_end)

    # -- running ------------------------------------------------------------------------

    async def _run(
        self, event: str, agent: Any, hooks: list[Hook], fields: Mapping[str, Any]
    ) -> list[Reply]:
        """Run ``hooks`` at once with the event's JSON; their replies, in order. A
        failed hook's (or a ``systemMessage``) text is logged as a warning."""
        session_id = "" if agent is None else agent.session.id
        cwd = None if agent is None else agent.cwd
        payload = {
            "session_id": session_id,
            "transcript_path": None,
            "cwd": cwd or str(self.project_dir),
            "permission_mode": "default",
            "hook_event_name": event,
            **fields,
        }
        data = json.dumps(payload).encode()
        env = {
            **os.environ,
            "CLAUDE_PROJECT_DIR": str(self.project_dir),
            "DSH_SESSION_ID": session_id,
        }
        outcomes: list[Outcome] = [Outcome(None)] * len(hooks)

        async def one(index: int, hook: Hook) -> None:
            outcomes[index] = await run_hook(
                hook.command, data, cwd=str(self.project_dir), env=env, seconds=hook.timeout
            )

        if len(hooks) == 1:
            await one(0, hooks[0])
        else:
            async with anyio.create_task_group() as tg:
                for index, hook in enumerate(hooks):
                    tg.start_soon(one, index, hook)
        plain = event in _PLAIN_CONTEXT
        replies = [
            read_reply(hook.command, outcome, plain_context=plain)
            for hook, outcome in zip(hooks, outcomes, strict=True)
        ]
        for reply in replies:
            if reply.warning is not None:
                self.ctx.logger.warning("%s: %s", event, reply.warning)
        return replies

    def _stopped(self, event: str, agent: Any, replies: list[Reply]) -> str | None:
        """The ``stopReason`` of a ``continue: false`` among ``replies`` (shown to the
        user), or None when every hook lets the agent go on."""
        reasons = [reply.stop for reply in replies if reply.stop is not None]
        if not reasons:
            return None
        reason = _joined(reasons) or "stopped by a hook"
        self.ctx.logger.warning("%s: a hook stopped the turn: %s", event, reason)
        return reason

    def _unblocking(self, event: str, agent: Any, replies: list[Reply]) -> None:
        """An event that cannot be blocked: a block or a stop is only shown to the user."""
        self._stopped(event, agent, replies)
        for reply in replies:
            if reply.block is not None:
                self.ctx.logger.warning("%s: %s", event, reply.block)

    # -- the events ---------------------------------------------------------------------

    async def tool_before(self, call: Any) -> HookDecision | None:
        """``PreToolUse``: deny (exit 2, ``deny``, ``decision: block``, ``continue:
        false``) wins over ask, ask over allow; ``updatedInput`` replaces the fields it
        names (on the call); ``additionalContext`` is added to what the model reads of
        the result. Allow and ``updatedInput`` alone answer None, so later listeners
        (the permission rules) still judge the call."""
        name = claude_tool_name(call)
        hooks = self.table.select("PreToolUse", name, call.name)
        if not hooks:
            return None
        arguments = call.input()
        shown = claude_tool_input(call)
        agent = call.agent
        replies = await self._run(
            "PreToolUse",
            agent,
            hooks,
            {"tool_name": name, "tool_input": shown, "tool_use_id": call.id},
        )
        context = _joined([reply.context for reply in replies])
        stop = self._stopped("PreToolUse", agent, replies)
        denials = [reply.block for reply in replies if reply.block is not None]
        denials += [
            reply.permission_reason or "denied by a PreToolUse hook"
            for reply in replies
            if reply.permission == "deny"
        ]
        if stop is not None or denials:
            if stop is not None and agent is not None:
                agent.cancel()
            return HookDecision("deny", reason=_joined([*denials, stop or "", context]))
        if context:
            key = id(call)
            gone = functools.partial(self._drop_context, key)
            self._call_context[key] = (weakref.ref(call, gone), context)
        updated = [reply.updated_input for reply in replies if reply.updated_input is not None]
        if updated:
            for fields in updated:
                arguments.update(from_tool_input(call.name, fields, shown))
            # On the call itself: what a later listener (a permission rule) judges.
            call.arguments = arguments
        asking = [reply for reply in replies if reply.permission == "ask"]
        if asking:
            return HookDecision("ask", reason=_joined([r.permission_reason for r in asking]))
        if any(reply.permission == "allow" for reply in replies):
            # No prompt for the call's own questions, but no answer either: a later
            # listener's deny or ask (a permission rule) still applies, as in Claude Code.
            call.permission = "allow"
        return None

    def _drop_context(self, key: int, ref: weakref.ref[Any]) -> None:
        # Called as the call is freed, so before its id can be another call's.
        self._call_context.pop(key, None)

    async def tool_after(self, call: Any, result: Any) -> str | None:
        """``PostToolUse``: each hook's ``decision: block`` reason, exit-2 stderr and
        ``additionalContext`` are added to what the model reads (the tool has run)."""
        texts: list[str] = []
        stashed = self._call_context.pop(id(call), None)
        if stashed is not None:  # the entry of this very call: it is alive
            texts.append(stashed[1])
        name = claude_tool_name(call)
        hooks = self.table.select("PostToolUse", name, call.name)
        if hooks:
            response: dict[str, Any] = {"content": result.content, "is_error": result.is_error}
            if result.code is not None:
                response["code"] = result.code
            agent = call.agent
            replies = await self._run(
                "PostToolUse",
                agent,
                hooks,
                {
                    "tool_name": name,
                    "tool_input": claude_tool_input(call),
                    "tool_response": response,
                    "tool_use_id": call.id,
                },
            )
            for reply in replies:
                texts += [reply.block or "", reply.context]
            if self._stopped("PostToolUse", agent, replies) is not None and agent is not None:
                agent.cancel()
        return _joined(texts) or None

    async def user_prompt(self, agent: Any, message: Any) -> HookDecision | None:
        """``UserPromptSubmit``: a block (exit 2, ``decision: block``, ``continue:
        false``) drops the message with the reason shown to the user; context
        (``additionalContext``, plain stdout, and what ``SessionStart`` hooks gave)
        is added to the turn."""
        texts = [self._session_context.pop(agent, "")]
        hooks = self.table.select("UserPromptSubmit")
        if hooks:
            replies = await self._run("UserPromptSubmit", agent, hooks, {"prompt": message.text})
            stop = self._stopped("UserPromptSubmit", agent, replies)
            blocks = [reply.block for reply in replies if reply.block is not None]
            if stop is not None or blocks:
                return HookDecision("deny", reason=_joined([*blocks, stop or ""]))
            texts += [reply.context for reply in replies]
        context = _joined(texts)
        return HookDecision(context=context) if context else None

    async def turn_stop(self, agent: Any, turn: int) -> str | None:
        """``Stop``: a block (exit 2, ``decision: block``) keeps the turn going with
        its reason; ``continue: false`` lets it end whatever the others say."""
        hooks = self.table.select("Stop")
        active = self._continued.get(agent) == turn
        replies = await self._run("Stop", agent, hooks, {"stop_hook_active": active})
        blocks = [reply.block for reply in replies if reply.block is not None]
        if self._stopped("Stop", agent, replies) is not None or not blocks:
            return None
        self._continued[agent] = turn
        return _joined(blocks)

    async def session_start(self, agent: Any, session: Any) -> None:
        """``SessionStart`` (source ``startup``, or ``resume`` for a session with
        turns): context it gives is added to the agent's first prompt."""
        source = "resume" if session.last_turn() else "startup"
        hooks = self.table.select("SessionStart", source)
        if not hooks:
            return
        replies = await self._run("SessionStart", agent, hooks, {"source": source})
        self._unblocking("SessionStart", agent, replies)
        context = _joined([reply.context for reply in replies])
        if context:
            self._session_context[agent] = context

    async def session_end(self, agent: Any, session: Any) -> None:
        """``SessionEnd`` (reason ``other``): notify only."""
        hooks = self.table.select("SessionEnd")
        replies = await self._run("SessionEnd", agent, hooks, {"reason": "other"})
        self._unblocking("SessionEnd", agent, replies)
