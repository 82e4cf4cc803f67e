"""Starting a deployment file (a YAML list of plugin entries) as one fiber."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._config import validate_config
from ._context import Context
from ._entry_values import line_of, resolve_env
from ._errors import ConfigError, DshError, DuplicateNameError, ServiceConflictError
from ._fiber import Fiber, FiberState
from ._plugin import Plugin, PluginSpec, plugin_spec
from ._resolve import file_target, resolve_plugin
from ._yaml import EntrySpec, deployment_error, parse_deployment

if TYPE_CHECKING:
    from ._redeploy import Replan

__all__ = [
    "Deployment",
    "leave_out_unset_env",
    "load_deployment",
    "plan_file",
    "settle_report",
]

#: Whether ``load_deployment`` leaves out entries whose ``!env`` variables are unset.
_LEAVE_OUT_UNSET = ContextVar("dsh_leave_out_unset_env", default=False)


@contextlib.contextmanager
def leave_out_unset_env() -> Iterator[None]:
    """Within the block, :func:`load_deployment` leaves out an entry whose ``!env``
    variable is unset (with no default) instead of failing: for a command that uses
    nothing such a variable holds (``dsh sessions`` needs no model credentials). The
    deployment's ``instance.left_out`` has one located line per variable; when the load
    fails anyway, those lines come first in its error."""
    token = _LEAVE_OUT_UNSET.set(True)
    try:
        yield
    finally:
        _LEAVE_OUT_UNSET.reset(token)


class _Entry:
    """Adapts an :class:`EntrySpec` to the runtime's ``EntryInfo`` protocol."""

    __slots__ = ("spec",)

    def __init__(self, spec: EntrySpec) -> None:
        self.spec = spec

    @property
    def where(self) -> str:
        return self.spec.where

    def locate(self, loc: Sequence[str | int]) -> str:
        return f"{self.spec.file}:{line_of(self.spec, loc)}"


@dataclass
class _Planned:
    entry: EntrySpec
    plugin: object = None
    name: str = ""
    config: Any = None
    children: list[_Planned] = field(default_factory=list)
    spec: PluginSpec | None = None


class Deployment(Plugin):
    """The fiber of one deployment file; ``fibers`` maps entry ids to their fibers,
    ``left_out`` says which entries :func:`leave_out_unset_env` left out and why,
    ``file`` and ``environ`` are what it was read with (see :meth:`replan`)."""

    def __init__(self, ctx: Context, config: _Loaded) -> None:
        super().__init__(ctx, config)
        self.plan, self.fibers, self.left_out = config.plan, config.fibers, config.left_out
        self.file, self.environ = config.file, config.environ
        #: The last parse of the file (see :func:`parse_deployment`).
        self.parsed: dict[bytes, list[EntrySpec]] = {}

    def replan(self) -> Replan:
        """Read the file again and say what a reload would change (see
        :class:`dsh.Replan`); nothing runs or stops yet. Raises
        :class:`DeploymentError` (every located failure) when the file or an entry
        fails to parse, import or validate, and :class:`ReloadRefusedError` when the
        change would leave an entry without a service it requires."""
        from ._redeploy import replan

        return replan(self)

    def sources(self) -> list[Path]:
        """The files a file plugin (``./tool.py``, a ``./pkg`` directory) of this
        deployment was imported from, each once."""
        base = self.file.parent
        found = {file_target(item.entry.name, base) for item in _walk(self.plan) if item.entry.name}
        return sorted(path for path in found if path is not None)

    def setup(self) -> None:
        _start(self.ctx, self.plan, self.fibers)


class _Group(Plugin):
    """A ``group: true`` entry: a fiber whose children are the nested entries."""

    def setup(self) -> None:
        plan, fibers = self.config
        _start(self.ctx, plan, fibers)


@dataclass
class _Loaded:
    plan: list[_Planned]
    fibers: dict[str, Fiber]
    left_out: list[str]
    file: Path
    environ: Mapping[str, str] | None


def _start(ctx: Context, plan: list[_Planned], fibers: dict[str, Fiber]) -> None:
    for item in plan:
        info = _Entry(item.entry)
        if item.entry.group:
            fibers[item.entry.id] = ctx._plugin(
                _Group, (item.children, fibers), name=f"group:{item.entry.id}", entry=info
            )
        else:
            fibers[item.entry.id] = ctx._plugin(
                item.plugin, item.config, name=item.name, entry=info
            )


@dataclass
class _Findings:
    """What planning found: ``failures`` fail the load; ``left_out`` has the unset
    ``!env`` variables of the entries :func:`leave_out_unset_env` left out."""

    failures: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def _plan(
    entries: list[EntrySpec], base: Path, environ: Mapping[str, str], found: _Findings
) -> list[_Planned]:
    failures = found.failures
    plan: list[_Planned] = []
    for entry in entries:
        if entry.disabled:
            continue
        if entry.group:
            plan.append(_Planned(entry, children=_plan(entry.children, base, environ, found)))
            continue
        assert entry.name is not None
        try:
            obj, default_name = resolve_plugin(entry.name, base)
        except DshError as exc:
            failures.append(f"{entry.where}: {exc}")
            continue
        try:
            spec = plugin_spec(obj, default_name)
        except DshError as exc:
            failures.append(f"{entry.where}: {exc}")
            continue
        try:
            config = resolve_env(entry.config, entry, environ)
        except ConfigError as exc:
            unset = found.left_out if _LEAVE_OUT_UNSET.get() else found.failures
            unset.extend(str(exc).splitlines())
            continue
        try:
            # Validated now so that one run reports every bad config; the fiber
            # validates again when it activates.
            validate_config(spec.config_model, config, spec.name, _Entry(entry))
        except ConfigError as exc:
            failures.append(str(exc))
            continue
        plan.append(_Planned(entry, obj, default_name, config, spec=spec))
    return plan


async def _settle(fibers: dict[str, Fiber]) -> None:
    # Fibers wake each other (a provider turning ACTIVE starts its dependents), so
    # wait until a whole pass finds nobody in a transition.
    while True:
        busy = [f for f in fibers.values() if f._driving]
        if not busy:
            return
        for fiber in busy:
            await fiber.settled()


def _report(fibers: dict[str, Fiber], by_id: dict[str, EntrySpec]) -> list[str]:
    """One line per problem of the settled entries.

    Two entries claiming one name (a service, a tool...) make one line naming both,
    whichever of them failed on it: what else fails in those entries, and every entry
    left waiting for a service (the disposed entries took theirs away), follows from it.
    """
    claims: dict[tuple[Fiber, Fiber, str], set[str]] = {}
    for fiber in fibers.values():
        claim = _claim(fiber)
        if claim is not None:
            first, second, kind, name = claim
            claims.setdefault((first, second, kind), set()).add(name)
    involved = {member for first, second, _ in claims for member in (first, second)}
    lines = [
        _conflict(first, second, kind, names) for (first, second, kind), names in claims.items()
    ]
    for entry_id, fiber in fibers.items():
        if fiber in involved or (claims and fiber.state is FiberState.PENDING):
            continue
        problem = _failure(fiber, by_id[entry_id])
        if problem is not None:
            lines.append(problem)
    return lines


def _claim(fiber: Fiber) -> tuple[Fiber, Fiber, str, str] | None:
    """``(earlier entry, later entry, kind, name)`` when ``fiber`` failed because two
    entries claimed one name; None otherwise."""
    if fiber.state is not FiberState.FAILED:
        return None
    error = fiber.error
    if isinstance(error, DuplicateNameError):
        kind, name = error.kind, error.name
    elif isinstance(error, ServiceConflictError):
        kind, name = "service", error.key
    else:
        return None
    holder, claimant = _entry_of(error.holder), _entry_of(error.claimant)
    if holder is None or claimant is None or holder is claimant:
        return None  # not two entries of a deployment: the error says it as it is
    first, second = sorted((holder, claimant), key=lambda f: f.uid)
    return first, second, kind, name


def _entry_of(owner: object) -> Fiber | None:
    return owner.entry_fiber() if isinstance(owner, Fiber) else None


def _conflict(first: Fiber, second: Fiber, kind: str, names: set[str]) -> str:
    """The line of two entries claiming ``names``: about the later entry, naming both,
    whichever of the two loaded first and so got the names."""
    assert first.entry is not None
    assert second.entry is not None
    verb = "provides" if kind == "service" else "registers"
    what = kind if len(names) == 1 else f"{kind}s"
    quoted = ", ".join(f'"{name}"' for name in sorted(names))
    return (
        f'{second.entry.where}: plugin "{second.name}" {verb} {what} {quoted}, '
        f"which {first.describe()} {verb} too"
    )


def _failure(fiber: Fiber, entry: EntrySpec) -> str | None:
    if fiber.state is FiberState.FAILED:
        error = fiber.error
        if isinstance(error, ConfigError):
            return str(error)
        return f'{entry.where}: plugin "{fiber.name}" failed: {type(error).__name__}: {error}'
    if fiber.state is FiberState.PENDING:
        assert fiber.spec is not None
        missing = [k for k in fiber.spec.inject if fiber.runtime.lookup(k) is None]
        keys = ", ".join(f'"{k}"' for k in missing)
        return (
            f'{entry.where}: plugin "{fiber.name}" is waiting for service(s) {keys} '
            "that no active plugin provides"
        )
    return None


async def load_deployment(
    path: str | os.PathLike[str], ctx: Context, *, environ: Mapping[str, str] | None = None
) -> Fiber:
    """Start every enabled entry of the deployment file at ``path`` under ``ctx``.

    Returns the deployment's fiber (disposing it removes everything). All-or-nothing:
    when any entry fails, or stays PENDING because a service it injects never appears,
    everything is disposed and one :class:`DeploymentError` lists every failure with
    its file, line and entry id. ``environ`` replaces ``os.environ`` for ``!env``.
    """
    file = Path(path)
    plan, found = plan_file(file, environ)
    if found.failures:
        raise deployment_error(file, found.left_out + found.failures)
    fibers: dict[str, Fiber] = {}
    loaded = _Loaded(plan, fibers, found.left_out, file, environ)
    deployment = ctx._plugin(Deployment, loaded, name=f"deployment:{file.name}")
    await deployment
    failures = await settle_report(fibers, plan)
    if failures:
        await deployment.dispose()
        raise deployment_error(file, found.left_out + failures)
    return deployment


def plan_file(
    file: Path,
    environ: Mapping[str, str] | None,
    memo: dict[bytes, list[EntrySpec]] | None = None,
) -> tuple[list[_Planned], _Findings]:
    """Parse ``file`` (see :func:`parse_deployment` for ``memo``) and resolve its
    enabled entries (importing their plugins)."""
    entries = parse_deployment(file, memo)
    found = _Findings()
    plan = _plan(entries, file.parent, os.environ if environ is None else environ, found)
    return plan, found


async def settle_report(fibers: dict[str, Fiber], plan: list[_Planned]) -> list[str]:
    """Wait for ``fibers`` to settle; one located line per problem among them."""
    await _settle(fibers)
    by_id = {item.entry.id: item.entry for item in _walk(plan)}
    return _report(fibers, by_id)


def _walk(plan: list[_Planned]) -> list[_Planned]:
    out: list[_Planned] = []
    for item in plan:
        out.append(item)
        out.extend(_walk(item.children))
    return out
