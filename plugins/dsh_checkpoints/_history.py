"""Reading a session's checkpoint events: what each turn (or restore) changed, what
``/undo`` would take back, and the turns ``/rewind`` offers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FILE_EVENT",
    "RESTORE_EVENT",
    "TREE_EVENT",
    "PathPlan",
    "TurnSummary",
    "Unit",
    "last_unit",
    "next_restore_id",
    "plan",
    "referenced",
    "turn_start",
    "turns",
]

#: ``{turn, path, before, after}`` (+ ``restore``, ``dirs``, ``by``): one file change.
FILE_EVENT = "checkpoint/file"
#: ``{turn, commit}``: the workspace snapshot taken before a bash call.
TREE_EVENT = "checkpoint/tree"
#: ``{turn, paths, restore, reverts, forced}`` (+ ``rewound_to``): one undo or rewind.
RESTORE_EVENT = "checkpoint/restore"


@dataclass(frozen=True)
class Unit:
    """What one undo takes back: the file events of a completed ``turn``
    (``restore`` None), or those of restore number ``restore`` (undoing an undo)."""

    turn: int
    restore: int | None
    events: tuple[Any, ...]


@dataclass(frozen=True)
class PathPlan:
    """One file of a restore: bring it back to ``desired`` (a digest, None: absent),
    expecting it holds ``expected`` now; ``dirs`` are directories the changes made
    (removed again, when empty, with the file)."""

    path: str
    desired: str | None
    expected: str | None
    dirs: tuple[str, ...]


@dataclass(frozen=True)
class TurnSummary:
    """A turn ``/rewind`` offers: its number, the first line of its first user
    message, and the files it changed."""

    turn: int
    title: str
    files: tuple[str, ...]


def _file_events(events: Iterable[Any]) -> list[Any]:
    return [e for e in events if e.type == FILE_EVENT]


def last_unit(events: Sequence[Any]) -> Unit | None:
    """The latest change ``/undo`` takes back: of the completed turns' changes and the
    restores, the one whose last file event is the latest; None when there is none."""
    ended = {e.data["turn"] for e in events if e.type == "turn/end"}
    for event in reversed(_file_events(events)):
        restore = event.data.get("restore")
        if restore is None and event.data["turn"] not in ended:
            continue  # a turn in progress is not undone
        same = [
            e
            for e in _file_events(events)
            if e.data.get("restore") == restore
            and (restore is not None or e.data["turn"] == event.data["turn"])
        ]
        return Unit(event.data["turn"], restore, tuple(same))
    return None


def plan(events: Iterable[Any]) -> list[PathPlan]:
    """Per file, in the order first changed: its state before the first of ``events``
    and after the last."""
    plans: dict[str, PathPlan] = {}
    for event in events:
        data = event.data
        path = data["path"]
        first = plans.get(path)
        if first is None:
            plans[path] = PathPlan(path, data["before"], data["after"], tuple(data.get("dirs", ())))
        else:
            plans[path] = PathPlan(path, first.desired, data["after"], first.dirs)
    return list(plans.values())


def next_restore_id(events: Iterable[Any]) -> int:
    """The number the next restore of this session takes."""
    numbers = [e.data.get("restore") or 0 for e in _file_events(events)]
    numbers += [e.data["restore"] for e in events if e.type == RESTORE_EVENT]
    return max(numbers, default=0) + 1


def turn_start(events: Sequence[Any], turn: int) -> int | None:
    """The seq of turn ``turn``'s ``turn/start`` (None: no such turn)."""
    for event in events:
        if event.type == "turn/start" and event.data["turn"] == turn:
            return int(event.seq)
    return None


def turns(events: Sequence[Any]) -> list[TurnSummary]:
    """Every turn, oldest first, with its title and the files it changed."""
    titles: dict[int, str] = {}
    files: dict[int, list[str]] = {}
    for event in events:
        data = event.data
        if event.type == "turn/start":
            titles[data["turn"]] = ""
            files[data["turn"]] = []
        elif event.type == "user/message" and not titles.get(data["turn"], "x"):
            titles[data["turn"]] = _first_line(data["message"])
        elif event.type == FILE_EVENT and data.get("restore") is None:
            changed = files.setdefault(data["turn"], [])
            if data["path"] not in changed:
                changed.append(data["path"])
    return [TurnSummary(t, titles[t], tuple(files[t])) for t in titles]


def _first_line(message: Any) -> str:
    text = " ".join(
        b.get("text", "") for b in message.get("content", ()) if b.get("type") == "text"
    )
    return text.strip().splitlines()[0] if text.strip() else ""


def referenced(events: Sequence[Any], keep_turns: int) -> set[str]:
    """The digests the file events of the last ``keep_turns`` turns name."""
    starts = [e.seq for e in events if e.type == "turn/start"]
    since = starts[-keep_turns] if len(starts) >= keep_turns else 0
    digests: set[str] = set()
    for event in _file_events(events[since:]):
        digests.update(d for d in (event.data["before"], event.data["after"]) if d)
    return digests
