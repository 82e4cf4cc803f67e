"""The hooks of each event, and which of them one event selects."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ._config import HookGroup, compile_matcher

__all__ = ["Hook", "HookTable"]


@dataclass(frozen=True)
class Hook:
    """One command hook and its timeout in seconds."""

    command: str
    timeout: float


class HookTable:
    """Hook groups by event, in the order they were read (the dsh config first)."""

    def __init__(self, groups: Iterable[tuple[str, HookGroup]], default_timeout: float) -> None:
        self._events: dict[str, list[tuple[re.Pattern[str] | None, list[Hook]]]] = {}
        for event, group in groups:
            hooks = [
                Hook(hook.command, default_timeout if hook.timeout is None else hook.timeout)
                for hook in group.hooks
            ]
            self._events.setdefault(event, []).append((compile_matcher(group.matcher), hooks))

    def __contains__(self, event: str) -> bool:
        return event in self._events

    def select(self, event: str, *names: str) -> list[Hook]:
        """The hooks of ``event`` whose matcher matches one of ``names`` in full (every
        group when no name is given), each command once (its first entry's timeout)."""
        chosen: dict[str, Hook] = {}
        for matcher, hooks in self._events.get(event, ()):
            if names and matcher is not None and not any(map(matcher.fullmatch, names)):
                continue
            for hook in hooks:
                chosen.setdefault(hook.command, hook)
        return list(chosen.values())
