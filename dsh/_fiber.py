"""Fibers: running plugin instances, their states and transitions."""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Any

import anyio

from ._disposer import Disposer
from ._errors import DshError, InactiveContextError
from ._fiber_hookimpls import register_hookimpls
from ._fiber_unwind import teardown, then
from ._runtime import wait_settled

if TYPE_CHECKING:
    import logging

    from ._config import EntryInfo
    from ._context import Context
    from ._plugin import PluginSpec
    from ._runtime import Runtime

__all__ = ["Fiber", "FiberState"]


class FiberState(enum.IntEnum):
    """The life cycle of a fiber (LOADING and UNLOADING are transitions)."""

    PENDING = 0
    LOADING = 1
    ACTIVE = 2
    FAILED = 3
    DISPOSED = 4
    UNLOADING = 5


_STALE: Any = object()  # a loaded epoch that no target equals: forces a reload
_NEVER: Any = object()  # "no failed epoch"


class Fiber:
    """One running instance of a plugin.

    Awaiting a fiber waits until it has settled and returns it; it raises the plugin's
    error when the fiber ends FAILED.
    """

    def __init__(
        self,
        runtime: Runtime,
        parent: Fiber | None,
        spec: PluginSpec | None,
        raw_config: Any,
        *,
        entry: EntryInfo | None = None,
    ) -> None:
        self.runtime = runtime
        self.parent = parent
        self.spec = spec
        self.uid = 0 if parent is None else runtime.next_uid()
        if spec is not None:
            self.name = spec.name
        else:
            self.name = "root"
        self.entry = entry
        #: ``id`` of the plugin object whose cached spec this fiber holds (None: the
        #: spec was made for this fiber alone).
        self.spec_key: int | None = None
        self.state = FiberState.PENDING if parent is not None else FiberState.ACTIVE
        self.config: Any = None
        self.error: BaseException | None = None
        self.instance: Any = None
        self.provides: list[str] = []
        self._logger: logging.Logger | None = None
        #: This fiber's context (its maker sets it: the context module imports this one).
        self.ctx: Context
        self._raw = raw_config
        self._effects: dict[Disposer, None] = {}
        self._inflight: set[Disposer] = set()
        self._disposed = False
        self._loaded: Any = None  # the epoch of the current load; None when not loaded
        self._failed: Any = _NEVER
        self._driving = False
        self._settled: anyio.Event | None = None
        self._load_scope: anyio.CancelScope | None = None
        #: The exact disposer of this fiber (an effect of the parent fiber).
        self.dispose: Disposer

    def __repr__(self) -> str:
        return f"<Fiber {self.name!r} {self.state.name}>"

    def __await__(self) -> Generator[Any, None, Fiber]:
        return self._await().__await__()

    async def _await(self) -> Fiber:
        await self.settled()
        # PENDING because a provider is still loading (a Service subclass started just
        # before this fiber): wait for it, then for the load it triggers.
        while self.state is FiberState.PENDING and self.spec is not None:
            coming = self.runtime.coming(self.spec.inject)
            if not coming:
                break
            for provider in coming:
                await provider.settled()
            await self.settled()
        if self.state is FiberState.FAILED and self.error is not None:
            raise self.error
        return self

    def describe(self) -> str:
        """``plugin "<name>"``, with ``(<file>:<line>: entry '<id>')`` when a deployment
        started it: how messages name the owner of something."""
        where = "" if self.entry is None else f" ({self.entry.where})"
        return f'plugin "{self.name}"{where}'

    def entry_fiber(self) -> Fiber | None:
        """The fiber of the deployment entry this plugin is part of: itself when a
        deployment started it, else the nearest such ancestor (None when none is)."""
        fiber: Fiber | None = self
        while fiber is not None and fiber.entry is None:
            fiber = fiber.parent
        return fiber

    @property
    def logger(self) -> logging.Logger:
        """The plugin's logger, ``dsh.<plugin-name>`` (made on first use)."""
        logger = self._logger
        if logger is None:
            import logging

            logger = self._logger = logging.getLogger(f"dsh.{self.name}")
        return logger

    def _validate(self, raw: Any) -> Any:
        """``raw`` checked against the plugin's ``Config`` (as it is when there is none)."""
        assert self.spec is not None
        model = self.spec.config_model
        if model is None:
            return raw
        from ._config import validate_config

        return validate_config(model, raw, self.name, self.entry)

    @property
    def is_active(self) -> bool:
        return self.state is FiberState.ACTIVE

    # -- effects ------------------------------------------------------------------------

    def check_alive(self) -> None:
        """Raise unless effects may be created on this fiber now."""
        if self.parent is None:
            self.runtime.require_open()
        if self._disposed or self.state is FiberState.UNLOADING:
            raise InactiveContextError(
                f'the context of plugin "{self.name}" is '
                f"{'disposed' if self._disposed else 'unloading'}: it cannot take new effects"
            )

    def add_effect(self, label: str) -> Disposer:
        if self.parent is None or self._disposed or self.state is FiberState.UNLOADING:
            self.check_alive()  # raises, unless this is the root of an open runtime
        d = Disposer(self, label)
        d._top = True
        self._effects[d] = None
        return d

    def register_hookimpls(self, instance: object) -> None:
        """Listen with ``instance``'s ``@hookimpl`` methods while this fiber is active."""
        register_hookimpls(self, instance)

    # -- transitions --------------------------------------------------------------------

    def _epoch(self) -> Any:
        """The provider uids of the injected services (then of the optional ones, None
        for an absent one), or None when an injected service is missing."""
        if self._disposed:
            return None
        assert self.spec is not None
        spec = self.spec
        if not spec.watches:
            return ()
        uids: list[int | None] = []
        for key in spec.inject:
            uid = self.runtime.provider_uid(key)
            if uid is None:
                return None
            uids.append(uid)
        uids.extend(self.runtime.provider_uid(key) for key in spec.optional)
        return tuple(uids)

    def refresh(self) -> bool:
        """Start a transition if the desired state changed; True if one is running.

        The transition runs later (``ctx.plugin`` never runs plugin code before it
        returns): the runtime queues the fiber and drives the queue in one task.
        """
        if self._driving:
            return True
        # Callers only refresh a loaded fiber after its epoch changed (or was made stale).
        if self._loaded is None:
            # A disposed fiber is driven by its disposer (``_start_dispose``) instead.
            target = self._epoch()
            if target is None or (self.state is FiberState.FAILED and target == self._failed):
                return False
        self.runtime.schedule(self)
        self._driving = True
        self.runtime.transition_started()
        return True

    def drive(self, step: bool | Awaitable[None] = True) -> None:
        """Run the transitions of a fiber that :meth:`refresh` queued (the runtime
        calls this). Each step runs synchronously as far as it can; the first that
        has to wait goes on in a task of its own, with the rest of the drive.
        ``step`` is what a step run already gave (True: none to wait for)."""
        try:
            while step is True:
                step = self._step()
        finally:
            # Ended unless a step goes on asynchronously (True here: a step raised).
            if isinstance(step, bool):
                self._end_drive()
        if step is not False:
            self.runtime.spawn(
                functools.partial(self._drive_async, step), f"dsh transition of {self.name}"
            )

    async def _drive_async(self, waiting: Awaitable[None]) -> None:
        try:
            await waiting
            while True:
                step = self._step()
                if step is False:
                    break
                if step is not True:
                    await step
        finally:
            self._end_drive()

    def load_now(self, epoch: Any) -> None:
        """Load a fiber nothing drives yet, right here (``epoch``: its current one).
        A load that finishes synchronously and leaves it active is the whole drive:
        nobody could have waited for it, so the drive's bookkeeping is skipped.
        Otherwise the drive goes on from it, as :meth:`drive` would."""
        self._driving = True
        try:
            step = self._load(epoch)
        except BaseException:  # a KeyboardInterrupt, say: nothing drives it any more
            self._driving = False
            raise
        if step is True and self.state is FiberState.ACTIVE:
            self._driving = False
            return
        self.runtime.transition_started()
        self.drive(step)

    def _end_drive(self) -> None:
        self._driving = False
        self.runtime.transition_ended()
        settled = self._settled
        self._settled = None
        if settled is not None:
            settled.set()

    def _step(self) -> bool | Awaitable[None]:
        """Start the next transition towards the desired state.

        False: nothing to do (settled); True: a transition finished synchronously;
        an awaitable: the rest of the transition that was started.
        """
        target = self._epoch()
        if self._loaded is not None:
            if target == self._loaded:
                return False
            return self._unload()
        if target is not None:
            if self.state is FiberState.FAILED and target == self._failed:
                return False
            return self._load(target)
        if self._disposed and self.state is not FiberState.DISPOSED:
            return self._unload()
        return False

    async def settled(self) -> None:
        """Wait until no transition of this fiber is running."""
        while self._driving:
            if self._settled is None:
                self._settled = anyio.Event()
            await self._settled.wait()

    def _set_state(self, state: FiberState) -> None:
        was_active = self.state is FiberState.ACTIVE
        self.state = state
        if was_active != (state is FiberState.ACTIVE):
            for key in list(self.provides):
                self.runtime.notify(key)

    def _load(self, epoch: Any) -> bool | Awaitable[None]:
        assert self.spec is not None
        self._set_state(FiberState.LOADING)
        self._loaded = epoch
        self.error = None
        self._failed = _NEVER
        try:
            self.config = self._validate(self._raw)
            main = self.add_effect("setup")
            result = self.spec.run(self, self.ctx, self.config)
            if main._start(result):
                return self._load_async(epoch, main, result)
        except Exception as exc:
            return self._load_failed(epoch, exc)
        self._loaded_ok(epoch)
        return True

    async def _load_async(self, epoch: Any, main: Disposer, result: Any) -> None:
        """The asynchronous setup of the main effect; disposing the fiber cancels it."""
        try:
            with anyio.CancelScope() as scope:
                self._load_scope = scope
                if self._disposed:
                    scope.cancel()
                await main._setup_async(result)
                if main._setup_error is not None:
                    raise main._setup_error
        except Exception as exc:
            self._load_scope = None
            rest = self._load_failed(epoch, exc)
            if not isinstance(rest, bool):
                await rest
            return
        self._load_scope = None
        self._loaded_ok(epoch)

    def _loaded_ok(self, epoch: Any) -> None:
        if not self._disposed and self._epoch() == epoch:
            self._set_state(FiberState.ACTIVE)

    def _load_failed(self, epoch: Any, exc: Exception) -> bool | Awaitable[None]:
        self.error = exc
        self._failed = epoch
        # A deployment reports its entries' failures itself (one located line
        # each), and so a part failing while its entry loads, which fails the entry:
        # their log records are for -v, where the traceback helps.
        entry = self.entry_fiber()
        reported = entry is self or (entry is not None and entry.state is FiberState.LOADING)
        log = self.logger.debug if reported else self.logger.error
        log("plugin %r failed to start", self.name, exc_info=exc)
        self._set_state(FiberState.UNLOADING)
        rest = teardown(self)
        if rest is None:
            self._failed_end()
            return True
        return then(rest, self._failed_end)

    def _failed_end(self) -> None:
        self._loaded = None
        self._set_state(FiberState.FAILED)

    def _unload(self) -> bool | Awaitable[None]:
        was_active = self.state is FiberState.ACTIVE
        self._set_state(FiberState.UNLOADING)
        if was_active:
            # Dependents leave first: wait for those that started a transition.
            for i, key in enumerate(self.provides):
                moving = self.runtime.notify(key)
                if moving:
                    return self._unload_async(i, moving)
        rest = teardown(self)
        if rest is None:
            self._unloaded()
            return True
        return then(rest, self._unloaded)

    async def _unload_async(self, index: int, moving: list[Fiber]) -> None:
        await wait_settled(moving)
        for key in self.provides[index + 1 :]:
            await wait_settled(self.runtime.notify(key))
        rest = teardown(self)
        if rest is not None:
            await rest
        self._unloaded()

    def _unloaded(self) -> None:
        self._loaded = None
        self._set_state(FiberState.DISPOSED if self._disposed else FiberState.PENDING)
        if self._disposed:
            self._forget()

    def _forget(self) -> None:
        assert self.spec is not None  # only plugin fibers are disposed this way
        self.runtime.forget(self, self.spec.watches, self.spec.provides)

    # -- the public controls ------------------------------------------------------------

    def _start_dispose(self) -> Any:
        """The body of ``fiber.dispose``: the synchronous part now, the rest awaited.

        A settled fiber is unloaded right here, as far as that goes without waiting,
        so disposing a plugin whose undos are all synchronous finishes before the call
        returns (and a parent unloading many such children spawns no task for them).
        """
        self._disposed = True
        if self._load_scope is not None:
            self._load_scope.cancel()
        if not self._driving:
            if self._loaded is None and not self._effects and not self._inflight:
                self._set_state(FiberState.DISPOSED)
                self._forget()
                return None
            # What the drive's first step would do; an unload that finishes
            # synchronously leaves it nothing more to do (disposed, nothing loaded).
            self._driving = True
            try:
                step = self._unload()
            except BaseException:  # as in load_now: the fiber is not left driven
                self._driving = False
                raise
            if step is True:
                self._driving = False
                return None
            self.runtime.transition_started()
            self.drive(step)
        return self.settled()

    def _check_plugin(self, action: str) -> None:
        self.check_alive()
        if self.spec is None:
            raise DshError(f"the root fiber cannot be {action}: it runs no plugin")

    async def restart(self) -> Fiber:
        """Unload and load again (a FAILED fiber retries); raises if it ends FAILED."""
        self._check_plugin("restarted")
        if self._loaded is not None:
            self._loaded = _STALE
        self._failed = _NEVER
        self.refresh()
        return await self

    async def update(self, config: Any) -> Fiber:
        """Validate ``config`` and restart with it.

        On an ACTIVE fiber an invalid config raises :class:`dsh.ConfigError` and the
        fiber keeps running on its old config. On a PENDING or FAILED fiber the config
        is stored and activation is retried.
        """
        self._check_plugin("updated")
        assert self.spec is not None
        if self.state is FiberState.ACTIVE:
            self._validate(config)
        self._raw = config
        return await self.restart()
