"""The ``hooks`` of Claude Code settings files, checked like the plugin's own config."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ._config import EVENTS, HookGroup
from ._errors import HookSettingsError

__all__ = ["settings_hooks"]

_log = logging.getLogger("dsh.hooks")


def settings_hooks(files: Iterable[tuple[Path, Mapping[str, Any]]]) -> list[tuple[str, HookGroup]]:
    """The hook groups of each settings file's ``hooks`` (files in order, each an
    already read JSON object), as ``(event, group)``. Events this plugin does not run
    (``Notification``, ``PreCompact``...) and hooks of another ``type`` than
    ``command`` are left out with a warning; anything else malformed raises
    :class:`HookSettingsError` naming the file and the place."""
    found: list[tuple[str, HookGroup]] = []
    for path, data in files:
        hooks = data.get("hooks")
        if hooks is None:
            continue
        if not isinstance(hooks, Mapping):
            raise HookSettingsError(f"{path}: hooks must be an object, got {_kind(hooks)}")
        for event, groups in hooks.items():
            if event not in EVENTS:
                _log.warning("%s: hooks.%s is an event dsh does not run; left out", path, event)
                continue
            if not isinstance(groups, list):
                raise HookSettingsError(
                    f"{path}: hooks.{event} must be a list, got {_kind(groups)}"
                )
            for index, group in enumerate(groups):
                where = f"hooks.{event}[{index}]"
                checked = _group(path, where, group)
                if checked.hooks:
                    found.append((event, checked))
    return found


def _group(path: Path, where: str, group: object) -> HookGroup:
    if not isinstance(group, Mapping):
        raise HookSettingsError(f"{path}: {where} must be an object, got {_kind(group)}")
    commands = group.get("hooks")
    if not isinstance(commands, list):
        raise HookSettingsError(f"{path}: {where}.hooks must be a list, got {_kind(commands)}")
    kept = []
    for index, hook in enumerate(commands):
        if isinstance(hook, Mapping) and hook.get("type") != "command":
            _log.warning(
                "%s: %s.hooks[%d] is a %r hook; dsh runs command hooks only, left out",
                path,
                where,
                index,
                hook.get("type"),
            )
            continue
        # Claude Code's other options (statusMessage, once, async...) are not run.
        kept.append(
            {key: hook[key] for key in ("type", "command", "timeout") if key in hook}
            if isinstance(hook, Mapping)
            else hook
        )
    try:
        matcher = group.get("matcher")
        return HookGroup.model_validate({"matcher": matcher or "", "hooks": kept})
    except ValidationError as exc:
        problems = "; ".join(
            f"{error['msg']} (at {where}.{'.'.join(str(part) for part in error['loc'])})"
            for error in exc.errors()
        )
        raise HookSettingsError(f"{path}: {problems}") from None


def _kind(value: object) -> str:
    return type(value).__name__
