"""The ``HotReload`` service: reload the deployment it runs in when its files change."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, Field

from dsh import (
    Deployment,
    DshError,
    Fiber,
    Replan,
    Service,
    deployment_of,
    forget_modules,
    hookspec,
)

from ._steps import StepGate, Steps
from ._watch import Watcher, load_awatch

__all__ = [
    "HotReload",
    "HotReloadConfig",
    "HotReloadError",
    "HotReloadSpecs",
    "ReloadReport",
    "watch",
]


class HotReloadError(DshError, RuntimeError):
    """``hot-reload`` was started outside a deployment (it reloads the deployment it
    is an entry of, or the one ``dsh run --watch`` started)."""

    code = "HOT_RELOAD"


class HotReloadConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: More files or directories to watch (a local package under development),
    #: relative to the deployment file's directory.
    paths: list[str] = Field(default_factory=list)
    #: Changes within this many milliseconds of the first one are one reload.
    debounce_ms: int = Field(default=200, ge=0)
    #: False: reload only when :meth:`HotReload.reload` is called.
    watch: bool = True


@dataclass(frozen=True)
class ReloadReport:
    """What one reload did: the ``changed`` files it was for, the ``modules`` it
    forgot, the entry ids ``added``, ``removed`` and ``reloaded``; ``error`` is the
    located error when the reload was refused or failed (the running version stays)."""

    changed: frozenset[Path]
    modules: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    reloaded: tuple[str, ...] = ()
    error: DshError | None = field(default=None, compare=False)


class HotReloadSpecs:
    """The events of ``hot-reload`` (emitted, unfiltered)."""

    @hookspec
    def hot_reload_waiting(self, changed: frozenset[Path]) -> None:
        """A reload waits for the agents' steps in flight to end."""

    @hookspec
    def hot_reload_done(self, report: ReloadReport) -> None:
        """A reload ended: applied, nothing to do, or refused (``report.error``)."""


class HotReload(Service):
    """Reloads the deployment it runs in (ctx key ``hot_reload``)."""

    key = "hot_reload"
    name = "hot-reload"
    Config = HotReloadConfig
    hookspecs = HotReloadSpecs

    def setup(self) -> Iterator[Callable[[], object]]:
        config: HotReloadConfig = self.config
        deployment = deployment_of(self.ctx)
        if deployment is None:
            raise HotReloadError(
                "hot-reload reloads the deployment it runs in: load it from a deployment "
                "file (an entry named hot-reload), or use dsh run --watch"
            )
        self.deployment: Deployment = deployment
        self.steps = Steps()
        self._lock = anyio.Lock()
        yield self.ctx.plugin(StepGate, self.steps).dispose
        if config.watch:
            load_awatch()  # a missing package fails the entry, naming the extra
            self.watcher = Watcher(self.watched, config.debounce_ms / 1000, self.reload)
            yield self.ctx.task(self.watcher.run, label="hot-reload watcher")
            yield self.watcher.stop

    def watched(self) -> list[Path]:
        """The files and directories a change of which reloads: the deployment file,
        every file plugin's file (or package directory) and the configured ``paths``."""
        deployment = self.deployment
        base = deployment.file.parent
        extra = [(base / path).resolve() for path in self.config.paths]
        return sorted({deployment.file.resolve(), *deployment.sources(), *extra})

    async def reload(self, changed: Iterable[Path] = ()) -> ReloadReport:
        """Reload the deployment now, for the ``changed`` files (their modules are
        imported afresh). Waits for the agents' steps in flight and holds new ones
        while it applies. Returns (and emits as ``hot-reload/done``) what it did; a
        refusal or failure is logged as a warning and left in ``report.error``."""
        paths = _resolved(changed)
        async with self._lock:
            modules = tuple(forget_modules(paths))
            report = ReloadReport(paths, modules)
            try:
                replan = self.deployment.replan()
                own = self.home_ctx.fiber.entry_fiber()
                if own is not None and replan.hold(own):
                    self.home_ctx.logger.warning(
                        "hot-reload: its own entry changed; restart dsh to apply that"
                    )
                if replan.changed:
                    await self._apply(paths, replan)
                report = ReloadReport(
                    paths,
                    modules,
                    tuple(replan.added),
                    tuple(replan.removed),
                    tuple(replan.reloaded),
                )
            except DshError as exc:
                self.home_ctx.logger.warning("hot-reload: %s (the running version stays)", exc)
                report = ReloadReport(paths, modules, error=exc)
        self.home_ctx.emit("hot-reload/done", report)
        return report

    async def _apply(self, paths: frozenset[Path], replan: Replan) -> None:
        try:
            if self.steps.begin():  # from here on, every step is seen
                self.home_ctx.emit("hot-reload/waiting", paths)
            await self.steps.hold()
            await replan.apply()
        finally:
            self.steps.release()


def _resolved(paths: Iterable[Path]) -> frozenset[Path]:
    return frozenset(Path(path).resolve() for path in paths)


async def watch(deployment: Fiber) -> Fiber | None:
    """Start ``hot-reload`` in ``deployment`` (``dsh run --watch``) unless one runs
    already; its fiber (None when one ran). Raises :class:`dsh.PluginLoadError` naming
    the extra when ``watchfiles`` is not installed."""
    load_awatch()
    if deployment.ctx.get("hot_reload") is not None:
        return None
    return await deployment.ctx.plugin(HotReload)
