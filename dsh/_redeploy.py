"""Reloading a running deployment: what its file says now, compared with what runs.

:meth:`Deployment.replan` reads the file again and pairs each entry with the one that
runs under its id. An entry whose plugin object, name or config differs is *reloaded*:
its fiber is disposed (its exact disposers undone) and a new fiber starts from the
plugin object the file resolves to now — for a file plugin whose module was forgotten
(:func:`dsh.forget_modules`), a fresh module. Entries only in the file are *added*,
entries no longer in it (or now disabled) *removed*; every other fiber is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._context import Context
from ._deployment import Deployment, _Entry, _Planned, _start, _walk, plan_file, settle_report
from ._errors import ReloadRefusedError
from ._fiber import Fiber
from ._yaml import deployment_error

__all__ = ["Replan", "deployment_of", "replan"]


@dataclass
class _Move:
    """One entry that starts, stops or both: ``fiber`` runs ``old`` now (under ``ctx``)."""

    ctx: Context
    old: _Planned | None
    new: _Planned | None
    fiber: Fiber | None = None
    started: Fiber | None = None


@dataclass
class Replan:
    """What reloading a deployment changes; nothing has changed until :meth:`apply`.

    ``added``, ``removed`` and ``reloaded`` are entry ids in file order; ``left_out``
    the lines of entries :func:`dsh.leave_out_unset_env` left out this time.
    """

    deployment: Deployment
    plan: list[_Planned]
    left_out: list[str]
    moves: list[_Move] = field(default_factory=list)
    #: ``(running list, new list)`` per level (the deployment's, each kept group's).
    levels: list[tuple[list[_Planned], list[_Planned]]] = field(default_factory=list)
    #: ``(fiber, new planned)`` of each entry that stays: its location may have moved.
    kept: list[tuple[Fiber, _Planned]] = field(default_factory=list)

    @property
    def added(self) -> list[str]:
        return [m.new.entry.id for m in self.moves if m.new is not None and m.old is None]

    @property
    def removed(self) -> list[str]:
        return [m.old.entry.id for m in self.moves if m.old is not None and m.new is None]

    @property
    def reloaded(self) -> list[str]:
        return [m.new.entry.id for m in self.moves if m.new is not None and m.old is not None]

    @property
    def changed(self) -> bool:
        """Whether applying this would start or stop anything."""
        return bool(self.moves)

    def hold(self, fiber: Fiber) -> bool:
        """Leave the entry ``fiber`` runs as it is (a reloader cannot reload the entry
        it runs in); whether the plan would have changed it."""
        for move in self.moves:
            if move.fiber is fiber:
                self.moves.remove(move)
                assert move.old is not None
                for _, new in self.levels:
                    if move.new in new:
                        new[new.index(move.new)] = move.old
                        break
                else:
                    self.levels[0][1].append(move.old)
                return True
        return False

    async def apply(self) -> None:
        """Stop what goes and start what comes, then wait for the deployment to settle.

        When a started entry fails (or waits for a service nobody provides), what this
        started is disposed, the previous version of every stopped entry starts again,
        and :class:`DeploymentError` lists the failures with file, line and entry id.
        """
        deployment = self.deployment
        fibers = deployment.fibers
        saved = [(running, list(running)) for running, _ in self.levels]
        await _stop([m.fiber for m in self.moves if m.fiber is not None], fibers, self.plan)
        self._commit([(running, new) for running, new in self.levels])
        for move in self.moves:
            if move.new is not None:
                _start(move.ctx, [move.new], fibers)
                move.started = fibers[move.new.entry.id]
        failures = await settle_report(fibers, deployment.plan)
        if not failures:
            deployment.left_out = self.left_out
            return
        await _stop([m.started for m in self.moves if m.started is not None], fibers, self.plan)
        self._commit(saved)
        for move in self.moves:
            if move.old is not None:
                _start(move.ctx, [move.old], fibers)
        await settle_report(fibers, deployment.plan)
        raise deployment_error(deployment.file, failures)

    def _commit(self, levels: list[tuple[list[_Planned], list[_Planned]]]) -> None:
        for running, new in levels:
            running[:] = new
        for fiber, item in self.kept:
            assert isinstance(fiber.entry, _Entry)
            fiber.entry.spec = item.entry


async def _stop(stopping: list[Fiber], fibers: dict[str, Fiber], plan: list[_Planned]) -> None:
    """Dispose ``stopping`` (last started first) and forget their ids and their
    children's."""
    gone = set(stopping)
    for entry_id, fiber in list(fibers.items()):
        if fiber in gone or _under(fiber, gone):
            del fibers[entry_id]
    for fiber in reversed(stopping):
        await fiber.dispose()


def _under(fiber: Fiber, ancestors: set[Fiber]) -> bool:
    parent = fiber.parent
    while parent is not None:
        if parent in ancestors:
            return True
        parent = parent.parent
    return False


def replan(deployment: Deployment) -> Replan:
    """See :meth:`Deployment.replan`."""
    plan, found = plan_file(deployment.file, deployment.environ, deployment.parsed)
    if found.failures:
        raise deployment_error(deployment.file, found.left_out + found.failures)
    result = Replan(deployment, plan, found.left_out)
    _pair(result, deployment.ctx, deployment.plan, plan)
    _check_services(result)
    return result


def _same(old: _Planned, new: _Planned) -> bool:
    return old.plugin is new.plugin and old.name == new.name and old.config == new.config


def _pair(result: Replan, ctx: Context, running: list[_Planned], new: list[_Planned]) -> None:
    """Record what changes from ``running`` to ``new`` (the entries of one level)."""
    fibers = result.deployment.fibers
    result.levels.append((running, new))
    before = {item.entry.id: item for item in running}
    for item in new:
        old = before.pop(item.entry.id, None)
        fiber = None if old is None else fibers[item.entry.id]
        if old is None:
            result.moves.append(_Move(ctx, None, item))
        elif old.entry.group and item.entry.group:
            assert fiber is not None
            result.kept.append((fiber, item))
            _pair(result, fiber.ctx, old.children, item.children)
        elif not old.entry.group and not item.entry.group and _same(old, item):
            assert fiber is not None
            result.kept.append((fiber, item))
        else:
            result.moves.append(_Move(ctx, old, item, fiber))
    for old in before.values():
        result.moves.append(_Move(ctx, old, None, fibers[old.entry.id]))


def _check_services(result: Replan) -> None:
    """Refuse a plan that removes the provider of a service an entry still requires
    (and starts no entry declaring it). A reloaded entry is expected to provide what
    it provided; when it does not, :meth:`Replan.apply` finds out and rolls back."""
    runtime = result.deployment.ctx.fiber.runtime
    stopping = {m.fiber for m in result.moves if m.fiber is not None and m.new is None}
    coming = {
        item.spec.provides
        for m in result.moves
        if m.new is not None
        for item in _walk([m.new])
        if item.spec is not None
    }
    problems = []
    for item in _walk(result.plan):
        spec = item.spec
        for key in () if spec is None else spec.inject:
            provision = runtime.lookup(key)
            if (
                key in coming
                or provision is None
                or (provision.fiber not in stopping and not _under(provision.fiber, stopping))
            ):
                continue
            assert spec is not None
            problems.append(
                f'{item.entry.where}: plugin "{spec.name}" requires service "{key}", '
                "which no entry would provide after this reload"
            )
    if problems:
        raise deployment_error(result.deployment.file, problems, ReloadRefusedError)


def deployment_of(ctx: Context) -> Deployment | None:
    """The deployment that ``ctx``'s fiber runs in (the nearest), or None."""
    fiber: Fiber | None = ctx.fiber
    while fiber is not None:
        if isinstance(fiber.instance, Deployment):
            return fiber.instance
        fiber = fiber.parent
    return None
