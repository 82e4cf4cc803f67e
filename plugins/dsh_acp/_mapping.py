"""How dsh's session events, tool calls, todo lists and turn ends read in ACP terms.

Pure functions (no I/O except :func:`session_updates` reading a file that ``write`` is
about to replace, to show the change as a diff). This module imports the
``agent-client-protocol`` package; ``dsh_acp`` loads it only when first needed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from acp import (
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    ContentToolCallContent,
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    PlanEntry,
    ResourceContentBlock,
    StopReason,
    TerminalToolCallContent,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    UnstructuredCommandInput,
    UserMessageChunk,
)

from dsh_session import SessionEvent
from dsh_slash_commands import SlashCommand

from ._service import AcpArgumentError

__all__ = [
    "TOOL_KINDS",
    "SessionUpdate",
    "commands_update",
    "plan_update",
    "prompt_text",
    "session_updates",
    "stop_reason",
    "tool_call_end",
    "tool_call_start",
    "tool_kind",
    "tool_title",
]

#: What a session event becomes on the wire.
SessionUpdate: TypeAlias = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | AvailableCommandsUpdate
)

#: What a tool call shows.
ToolCallContent: TypeAlias = (
    ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent
)

#: The ACP tool kind of each tool dsh ships; any other tool is ``other``.
TOOL_KINDS: Mapping[str, ToolKind] = {
    "read": "read",
    "write": "edit",
    "edit": "edit",
    "bash": "execute",
    "job_output": "execute",
    "job_list": "execute",
    "job_kill": "execute",
    "grep": "search",
    "glob": "search",
    "web_fetch": "fetch",
    "web_search": "fetch",
    "todo_write": "think",
}

#: The argument a title quotes, the first one a call has (a non-empty string, or a
#: list of them such as ``web_search``'s ``queries``).
_TITLE_KEYS = (
    "command",
    "file_path",
    "pattern",
    "url",
    "queries",
    "job_id",
    "description",
    "subagent_id",
    "path",
)
#: How many characters of the quoted argument a title keeps.
TITLE_CHARS = 120
#: The tools whose arguments name the file they work on.
_FILE_TOOLS = frozenset({"read", "write", "edit"})
#: The tools whose call shows a diff; their result text is shown only when they fail.
_DIFF_TOOLS = frozenset({"write", "edit"})
#: A file ``write`` replaces is read for the diff only up to this size.
DIFF_MAX_BYTES = 1 << 20

#: The ACP stop reason of each dsh turn end kind (``error`` has none: the prompt
#: request fails instead).
_STOP_REASONS: Mapping[str, StopReason] = {
    "completed": "end_turn",
    "max-tokens": "max_tokens",
    "blocked": "refusal",
    "aborted": "cancelled",
    "interrupted": "cancelled",
}


def tool_kind(name: str) -> ToolKind:
    """The ACP kind of tool ``name``: ``read``, ``edit``, ``execute``, ``search``,
    ``fetch``, ``think`` for the tools dsh ships (see :data:`TOOL_KINDS`), else
    ``other``."""
    return TOOL_KINDS.get(name, "other")


def absolute_path(path: str, cwd: str | None) -> str:
    """``path`` as an absolute path: a relative one is taken from ``cwd`` (the session's
    working directory), else from the process's."""
    return os.path.normpath(os.path.join(cwd or os.getcwd(), os.path.expanduser(path)))


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    line = lines[0]
    if len(lines) > 1 or len(line) > TITLE_CHARS:
        line = line[: TITLE_CHARS - 1] + "…"
    return line


def tool_title(name: str, arguments: Any, cwd: str | None = None) -> str:
    """The title a tool call is shown with: ``<name>: <argument>`` quoting the first
    telling argument (the command, the file — made absolute from ``cwd`` —, the
    pattern, the URL, the queries, …) on one line, cut to :data:`TITLE_CHARS`; just the
    name when the arguments hold none."""
    if isinstance(arguments, Mapping):
        for key in _TITLE_KEYS:
            value = arguments.get(key)
            if isinstance(value, list):
                value = "; ".join(str(item) for item in value)
            if isinstance(value, str) and value.strip():
                if key == "file_path":
                    value = absolute_path(value, cwd)
                return f"{name}: {_one_line(value)}"
    return name


def _parse_arguments(raw: Any) -> Any:
    """The model's JSON arguments as an object, or the raw text when they are not one."""
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError):
        return raw
    return parsed if isinstance(parsed, dict) else raw


def _current_text(path: str) -> tuple[bool, str | None]:
    """``(exists, text)`` of the file at ``path`` now; ``text`` is None when it cannot
    be shown (not a UTF-8 file, larger than :data:`DIFF_MAX_BYTES`, unreadable)."""
    try:
        with open(path, "rb") as file:
            data = file.read(DIFF_MAX_BYTES + 1)
    except FileNotFoundError:
        return False, None
    except OSError:
        return True, None
    if len(data) > DIFF_MAX_BYTES:
        return True, None
    try:
        return True, data.decode("utf-8")
    except UnicodeDecodeError:
        return True, None


def _diff(
    name: str, path: str, args: Mapping[str, Any], live: bool
) -> FileEditToolCallContent | None:
    """The diff a ``write`` or ``edit`` call shows: ``edit`` the replaced text and its
    replacement; ``write`` the file's current text (none: a new file) and the new
    content — only while the call is live, as the file has changed since on replay."""
    if name == "edit":
        old, new = args.get("old_string"), args.get("new_string")
        if isinstance(old, str) and isinstance(new, str):
            return tool_diff_content(path, new, old)
        return None
    content = args.get("content")
    if not live or not isinstance(content, str):
        return None
    exists, text = _current_text(path)
    if exists and text is None:
        return None
    return tool_diff_content(path, content, text)


def tool_call_start(
    data: Mapping[str, Any], cwd: str | None = None, live: bool = True
) -> ToolCallStart:
    """The ``tool_call`` update of a ``tool/call`` event: its kind and title, status
    ``in_progress``, the parsed arguments as ``rawInput``, the file it works on as its
    location, and for ``write``/``edit`` the change as a diff (see :func:`session_updates`)."""
    name: str = data["name"]
    args = _parse_arguments(data["arguments"])
    content: list[ToolCallContent] = []
    locations: list[ToolCallLocation] = []
    file_path = args.get("file_path") if isinstance(args, dict) else None
    if name in _FILE_TOOLS and isinstance(file_path, str) and file_path:
        path = absolute_path(file_path, cwd)
        offset = args.get("offset")
        line = offset if name == "read" and isinstance(offset, int) else None
        locations.append(ToolCallLocation(path=path, line=line))
        diff = _diff(name, path, args, live) if name in _DIFF_TOOLS else None
        if diff is not None:
            content.append(diff)
    return ToolCallStart(
        session_update="tool_call",
        tool_call_id=data["call_id"],
        title=tool_title(name, args, cwd),
        kind=tool_kind(name),
        status="in_progress",
        content=content or None,
        locations=locations or None,
        raw_input=args,
    )


def tool_call_end(data: Mapping[str, Any]) -> ToolCallProgress:
    """The ``tool_call_update`` of a ``tool/result`` event: ``completed`` or ``failed``;
    the result's text as content (the output of a command, the page read, the error),
    except for a ``write``/``edit`` that succeeded, which keeps showing its diff."""
    failed = bool(data.get("is_error"))
    content: list[ToolCallContent] | None = None
    if failed or data["name"] not in _DIFF_TOOLS:
        content = [tool_content(text_block(data["content"]))]
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=data["call_id"],
        status="failed" if failed else "completed",
        content=content,
    )


def plan_update(todos: Iterable[Mapping[str, Any]]) -> AgentPlanUpdate:
    """The ``plan`` update of a ``todo/write`` list: one entry per task, in order, its
    ``content`` and ``status`` (``pending``, ``in_progress``, ``completed``: the same
    words) and priority ``medium`` (dsh's tasks have none)."""
    entries = [
        PlanEntry(content=todo["content"], status=todo["status"], priority="medium")
        for todo in todos
    ]
    return AgentPlanUpdate(session_update="plan", entries=entries)


def commands_update(commands: Iterable[SlashCommand]) -> AvailableCommandsUpdate:
    """``available_commands_update``: each command's name (without the ``/``), its
    description, and its argument hint as the unstructured input's hint."""
    return AvailableCommandsUpdate(
        session_update="available_commands_update",
        available_commands=[
            AvailableCommand(
                name=command.name,
                description=command.description,
                input=AvailableCommandInput(UnstructuredCommandInput(hint=command.argument_hint))
                if command.argument_hint
                else None,
            )
            for command in commands
        ],
    )


def _message_updates(data: Mapping[str, Any]) -> list[SessionUpdate]:
    updates: list[SessionUpdate] = []
    role = data["message"]["role"]
    for block in data["message"]["content"]:
        kind = block.get("type")
        if role == "user" and kind == "text":
            updates.append(update_user_message_text(block["text"]))
        elif role == "assistant" and kind == "text":
            updates.append(update_agent_message_text(block["text"]))
        elif role == "assistant" and kind == "reasoning":
            updates.append(update_agent_thought_text(block["text"]))
    return updates


def session_updates(
    event: SessionEvent, cwd: str | None = None, *, live: bool = True
) -> list[SessionUpdate]:
    """What one session event shows the client (often nothing).

    ``live`` (a turn streaming now): ``assistant/chunk`` text and reasoning deltas
    become ``agent_message_chunk`` / ``agent_thought_chunk``; the whole messages and the
    user's own message are not repeated. Replaying a stored session (``live=False``):
    ``user/message`` becomes ``user_message_chunk`` and each ``assistant/message``
    (interrupted ones too) its text and thought chunks; chunks are skipped. Both:
    ``tool/call`` → ``tool_call`` (:func:`tool_call_start`), ``tool/result`` →
    ``tool_call_update`` (:func:`tool_call_end`), ``todo/write`` → ``plan``.
    """
    data = event.data
    kind = event.type
    if kind == "assistant/chunk":
        chunk = data["chunk"]
        if live and chunk["type"] == "text-delta":
            return [update_agent_message_text(chunk["text"])]
        if live and chunk["type"] == "reasoning-delta":
            return [update_agent_thought_text(chunk["text"])]
        return []
    if kind in ("user/message", "assistant/message"):
        return [] if live else _message_updates(data)
    if kind == "tool/call":
        return [tool_call_start(data, cwd, live)]
    if kind == "tool/result":
        return [tool_call_end(data)]
    if kind == "todo/write":
        return [plan_update(data["todos"])]
    return []


def stop_reason(reason: Mapping[str, Any] | None) -> StopReason | None:
    """The ACP stop reason of a turn that ended with ``reason``: ``completed`` →
    ``end_turn``, ``max-tokens`` → ``max_tokens``, ``blocked`` → ``refusal``,
    ``aborted`` and ``interrupted`` → ``cancelled``, and a turn that never ran (None:
    cancelled before it started) → ``cancelled``. None for ``error`` (and any other
    kind): the prompt request fails with the turn's error instead."""
    if reason is None:
        return "cancelled"
    return _STOP_REASONS.get(reason.get("kind", ""))


def prompt_text(blocks: Sequence[Any]) -> str:
    """The user message of a ``session/prompt``: text blocks as they are, resource
    links as ``[name](uri)``, embedded text resources wrapped in ``<context
    ref="uri">…</context>``, joined in order.

    Raises :class:`AcpArgumentError` for content dsh does not accept (images, audio,
    binary resources: the capabilities say so) and for a prompt without text.
    """
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            resource = block.resource
            parts.append(f'\n<context ref="{resource.uri}">\n{resource.text}\n</context>\n')
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise AcpArgumentError(
                f"session/prompt: {kind} content is not supported (dsh accepts text, "
                "resource links and embedded text resources)"
            )
    text = "".join(parts)
    if not text.strip():
        raise AcpArgumentError("session/prompt: the prompt holds no text")
    return text
