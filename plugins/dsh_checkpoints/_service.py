"""The ``Checkpoints`` service: every fs mutation's previous bytes in a content-addressed
store, workspace snapshots before bash calls, and undo and rewind from the session log."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from dsh import Context, Disposer, Service
from dsh_bash import BashRequest
from dsh_fs import Commit
from dsh_session import Session, SessionHeader

from ._blobs import BlobStore, Collected
from ._config import CheckpointsConfig
from ._disk import NotRegular, digest_of, missing_dirs, read_current, remove, restore_bytes
from ._errors import CheckpointConflictError, CheckpointError
from ._history import (
    FILE_EVENT,
    RESTORE_EVENT,
    TREE_EVENT,
    PathPlan,
    TurnSummary,
    last_unit,
    next_restore_id,
    plan,
    referenced,
    turn_start,
    turns,
)
from ._shadow import ShadowRepo
from ._slash import slash_commands

__all__ = ["Checkpoints", "Restored", "Rewound"]

_log = logging.getLogger("dsh.checkpoints")

#: Contents up to this size are stored on the event loop; larger ones in a thread.
_INLINE = 64 * 1024


@dataclass(frozen=True)
class Restored:
    """What an undo (or the restore of a rewind) did: the ``turn`` it took back, the
    files it ``restored``, those it overwrote although they had changed since
    (``overwritten``, with ``force``), those it could not touch (``left``: not a
    regular file any more), the restore's number and the restore it ``reverts``
    (None: it took back the turn's own changes)."""

    turn: int
    restored: tuple[str, ...]
    overwritten: tuple[str, ...]
    left: tuple[str, ...]
    restore: int
    reverts: int | None


@dataclass(frozen=True)
class Rewound:
    """What a rewind did: the files' ``restore``, the ``session`` the conversation
    continues in, and the ``agent`` now on it (None when rewinding a bare session)."""

    restore: Restored
    session: Session
    agent: Any


class Checkpoints(Service):
    """Checkpoints, undo and rewind (ctx key ``checkpoints``); see the README."""

    key = "checkpoints"
    name = "checkpoints"
    Config = CheckpointsConfig
    inject = ("sessions", "fs")
    optional = ("bash", "slash_commands", "agents")

    def __init__(self, ctx: Context, config: CheckpointsConfig) -> None:
        super().__init__(ctx, config)
        self._stores: dict[Path, BlobStore] = {}
        self._shadows: dict[Path, ShadowRepo] = {}
        self._lock = anyio.Lock()

    def setup(self) -> Iterator[Disposer]:
        ctx = self.home_ctx
        yield ctx.sessions.declare_event_types(FILE_EVENT, TREE_EVENT, RESTORE_EVENT, durable=True)
        yield ctx.fs.add_commit_hook(self._on_commit)
        bash = ctx.get("bash")
        if self.config.snapshot_bash and bash is not None:
            yield bash.add_before_run(self._on_bash)
        commands = ctx.get("slash_commands")
        if commands is not None:
            for command in slash_commands(self):
                yield commands.register(command)

    # -- where things live -------------------------------------------------------------

    def store_dir(self, cwd: str | None) -> Path:
        """The store of the workspace ``cwd`` (None: the process cwd): config ``store``
        taken from it."""
        config: CheckpointsConfig = self.config
        return (Path(cwd or os.getcwd()) / os.path.expanduser(config.store)).absolute()

    def _store(self, session: Session) -> BlobStore:
        directory = self.store_dir(session.header.cwd)
        store = self._stores.get(directory)
        if store is None:
            store = self._stores[directory] = BlobStore(directory)
        return store

    def _attributed(self, session: Session) -> tuple[Session, str | None]:
        """The session a change of ``session`` is recorded in: a subagent's goes to its
        parent's (the turn that started it), named ``by`` the child's session."""
        by = None
        while True:
            parent_id = session.header.meta.get("parent_session")
            parent = self.home_ctx.sessions.get(parent_id) if isinstance(parent_id, str) else None
            if parent is None:
                return session, by
            by = by or session.id
            session = parent

    # -- recording ---------------------------------------------------------------------

    async def _on_commit(self, commit: Commit) -> None:
        session = _session_of(getattr(commit.call, "agent", None))
        if session is None:
            return
        target, by = self._attributed(session)
        store = self._store(target)
        before = None
        if commit.before is not None and commit.before_version is not None:
            before = await self._put(store, commit.before, commit.before_version.digest)
        data: dict[str, Any] = {
            "turn": target.last_turn(),
            "path": commit.target,
            "before": before,
            "after": commit.after_version.digest,
        }
        if commit.before is None:
            dirs = missing_dirs(commit.target)
            if dirs:
                data["dirs"] = list(dirs)
        if by is not None:
            data["by"] = by
        target.append(FILE_EVENT, data)
        self._bound(store)

    async def _put(self, store: BlobStore, data: bytes, digest: str) -> str:
        if len(data) <= _INLINE:
            return store.put(data, digest)
        return await anyio.to_thread.run_sync(store.put, data, digest)

    async def _on_bash(self, request: BashRequest) -> None:
        session = self.home_ctx.sessions.get(request.session_id) if request.session_id else None
        if session is None:
            return
        target, _ = self._attributed(session)
        root = Path(target.header.cwd or request.cwd or os.getcwd())
        git_dir = self.store_dir(str(root)) / "shadow.git"
        shadow = self._shadows.get(git_dir)
        if shadow is None:
            shadow = self._shadows[git_dir] = ShadowRepo(git_dir, root)
        commit = await shadow.snapshot()
        target.append(TREE_EVENT, {"turn": target.last_turn(), "commit": commit})

    def _bound(self, store: BlobStore) -> None:
        if store.size() <= self.config.max_bytes:
            return
        done = self._collect(store)
        _log.warning(
            "checkpoint store %s is over max_bytes (%d): removed %d blob(s), %d bytes, that "
            "the last %d turns do not reference; older changes can no longer be undone",
            store.blobs,
            self.config.max_bytes,
            len(done.removed),
            done.freed,
            self.config.keep_turns,
        )

    def _collect(self, store: BlobStore, extra: Sequence[Session] = ()) -> Collected:
        keep: set[str] = set()
        for session in [*self.home_ctx.sessions.list(), *extra]:
            keep |= referenced(session.events, self.config.keep_turns)
        return store.collect(self.config.max_bytes, keep)

    def gc(self, cwd: str | None = None, sessions: Sequence[Session] = ()) -> Collected:
        """Bound the store of the workspace ``cwd`` now (``dsh checkpoints gc``): the
        oldest blobs that the last ``keep_turns`` turns of the live sessions and of
        ``sessions`` do not reference go, until it holds at most ``max_bytes``."""
        directory = self.store_dir(cwd)
        store = self._stores.get(directory) or BlobStore(directory)
        return self._collect(store, sessions)

    # -- undo and rewind ---------------------------------------------------------------

    def turns(self, agent_or_session: Any) -> list[TurnSummary]:
        """The turns of the session, oldest first (what ``/rewind`` lists)."""
        return turns(_require_session(agent_or_session).events)

    async def undo(self, agent_or_session: Any, *, force: bool = False) -> Restored:
        """Take back the latest change: every file the last completed turn that changed
        files changed, or — when the latest change is a restore — that restore (so an
        undo is undone by the next). Raises :class:`CheckpointError` when there is
        nothing to undo, :class:`CheckpointConflictError` (restoring nothing) when a file
        changed since and not ``force``, ``CheckpointBlobError`` for a lost checkpoint."""
        session = _require_session(agent_or_session)
        async with self._lock:
            unit = last_unit(session.events)
            if unit is None:
                raise CheckpointError(
                    f'nothing to undo in session "{session.id}": no completed turn changed a file'
                )
            return await self._restore(
                session, plan(unit.events), unit.turn, reverts=unit.restore, force=force
            )

    async def rewind(self, agent_or_session: Any, turn: int, *, force: bool = False) -> Rewound:
        """Restore the files to their state before turn ``turn`` and continue in a new
        session seeded with every event before it. Its header's ``rewound_from`` names
        the original; the original's header gets ``rewound_to`` (a list: one entry per
        rewind, through ``sessions.amend_meta``) and its ``checkpoint/restore`` names
        the new one in ``rewound_to``. An agent is replaced by one with the same id on
        the new session. Raises :class:`CheckpointError` for an unknown turn or a
        running agent, and what :meth:`undo` raises."""
        session = _require_session(agent_or_session)
        agent = None if isinstance(agent_or_session, Session) else agent_or_session
        if agent is not None and agent.status != "idle":
            raise CheckpointError(
                f'agent "{agent.id}" is running a turn: rewind once it is idle (or cancel it)'
            )
        async with self._lock:
            start = turn_start(session.events, turn)
            if start is None:
                raise CheckpointError(
                    f'session "{session.id}" has no turn {turn} '
                    f"(its turns are 1 to {session.last_turn()})"
                    if session.last_turn()
                    else f'session "{session.id}" has no turns to rewind'
                )
            new_id = uuid.uuid4().hex
            changes = [e for e in session.events[start:] if e.type == FILE_EVENT]
            restored = await self._restore(
                session, plan(changes), turn, reverts=None, force=force, rewound_to=new_id
            )
            original = session.header.meta
            rewound = {"session": new_id, "turn": turn}
            self.home_ctx.sessions.amend_meta(
                session.id, {"rewound_to": [*original.get("rewound_to", ()), rewound]}
            )
            meta = {key: value for key, value in original.items() if key != "rewound_to"}
            meta["rewound_from"] = {"session": session.id, "turn": turn}
            header = SessionHeader(new_id, time.time(), session.header.cwd, meta)
            seeded = Session(header, list(session.events[:start]))
        if agent is None:
            return Rewound(restored, seeded, None)
        agents = self.home_ctx.agents
        model, max_tokens, agent_id = agent.model, agent.max_tokens, agent.id
        await agent.dispose()
        renewed = agents.create(agent_id, model=model, session=seeded, max_tokens=max_tokens)
        return Rewound(restored, seeded, renewed)

    async def _restore(
        self,
        session: Session,
        plans: list[PathPlan],
        turn: int,
        *,
        reverts: int | None,
        force: bool,
        rewound_to: str | None = None,
    ) -> Restored:
        store = self._store(session)
        changed: list[str] = []
        left: list[str] = []
        todo: list[tuple[PathPlan, bytes | None, str | None]] = []
        for item in plans:
            try:
                current = read_current(item.path)
            except NotRegular:
                left.append(item.path)
                continue
            digest = digest_of(current)
            if digest == item.desired:
                continue  # already as it was
            if digest != item.expected:
                changed.append(item.path)
                if not force:
                    continue
            todo.append((item, current, digest))
        if (changed or left) and not force:
            listed = ", ".join(f'"{p}"' for p in [*changed, *left])
            raise CheckpointConflictError(
                f"cannot restore turn {turn}: {listed} changed since (by someone else); "
                "nothing was restored — force it to overwrite them",
                [*changed, *left],
            )
        # Every content is fetched before anything changes: a lost one fails the whole.
        wanted = {
            item.path: store.get(item.desired, wanted_for=item.path)
            for item, _, _ in todo
            if item.desired is not None
        }
        number = next_restore_id(session.events)
        restored: list[str] = []
        for item, current, digest in todo:
            before = None
            if current is not None and digest is not None:
                before = await self._put(store, current, digest)
            data: dict[str, Any] = {
                "turn": turn,
                "path": item.path,
                "before": before,
                "after": item.desired,
                "restore": number,
            }
            if item.desired is None:
                session.append(FILE_EVENT, data)
                remove(item.path, item.dirs)
            else:
                dirs = missing_dirs(item.path)
                if dirs:
                    data["dirs"] = list(dirs)
                session.append(FILE_EVENT, data)
                restore_bytes(item.path, wanted[item.path])
            restored.append(item.path)
        record: dict[str, Any] = {
            "turn": turn,
            "paths": restored,
            "restore": number,
            "reverts": reverts,
            "forced": [p for p in changed if p in restored],
        }
        if rewound_to is not None:
            record["rewound_to"] = rewound_to
        session.append(RESTORE_EVENT, record)
        self._bound(store)
        return Restored(
            turn, tuple(restored), tuple(record["forced"]), tuple(left), number, reverts
        )


def _session_of(agent: Any) -> Session | None:
    session = getattr(agent, "session", None)
    return session if isinstance(session, Session) else None


def _require_session(agent_or_session: Any) -> Session:
    if isinstance(agent_or_session, Session):
        return agent_or_session
    session = _session_of(agent_or_session)
    if session is None:
        raise CheckpointError(f"{agent_or_session!r} is neither an agent nor a session")
    return session
