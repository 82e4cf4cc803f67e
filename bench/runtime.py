"""Runtime benchmark: mount/dispose and event dispatch, beside cordis-python and pluggy.

Run: ``.venv/bin/python -m bench.runtime`` (asyncio backend; ``--quick`` for a smoke run,
``--profile`` to also print cProfile call counts of one dsh mount/dispose at N=1000,
``--cpu`` to time the dispatch tables in thread CPU time, which a loaded machine's
preemption does not inflate: its wall clock favours the shorter loops).

The peer cordis-python (the Python port of cordis) is not on PyPI; install it from its
repository into the venv first, or its rows are skipped with a message::

    git clone https://github.com/ddebowczyk/cordis-python /tmp/cordis-python
    .venv/bin/pip install /tmp/cordis-python

* mount/dispose: a fresh app (a root ``Context``; a cordis ``PluginHost``), one group
  plugin mounting N member plugins, settled, then disposed. Every member registers one
  listener and one composite effect (a generator yielding the listener's exact
  disposer and a plain undo). The rows:

  - dsh function plugins: ``apply(ctx, config)`` listening with ``ctx.on``;
  - dsh ``@hookimpl`` class plugins: a ``dsh.Plugin`` subclass whose listener is a
    ``@dsh.hookimpl`` method, its ``setup`` making the composite (yielding the plain
    undo: the hookimpl is registered by the runtime, not by the composite);
  - cordis-python: a function plugin listening with ``bus.through(ctx).on`` on the
    scope of its instance, the same composite through ``scope_of(ctx).effect``;
  - pluggy: register and unregister N objects with one hookimpl each (a listener
    only: no ownership, no teardown), for scale;
  - floor: an ``AsyncExitStack`` with the same 2N callbacks.

* emit: one event to L listeners: dsh ``emit`` (sync) beside ``pm.hook.x(payload=…)``,
  cordis-python ``bail`` (its synchronous dispatch) and a plain ``for`` loop floor.
* waterfall: one waterfall through L listeners, each awaiting ``call_next``, around an
  inner function: dsh ``ctx.waterfall`` beside cordis-python ``bus.waterfall`` and a
  hand-written async middleware chain (the floor: an index and a closure per link).
"""

from __future__ import annotations

import contextlib
import cProfile
import importlib
import io
import pstats
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pluggy

import dsh
from bench._timing import Row, measure, measure_async, print_table

cordis: Any
try:
    cordis = importlib.import_module("cordis")
except ImportError:  # the peer is installed by hand (see the module docstring)
    cordis = None

spec_marker = pluggy.HookspecMarker("bench")
impl_marker = pluggy.HookimplMarker("bench")

CORDIS_MISSING = (
    "cordis-python is not installed: its rows are skipped. Install it from its repository: "
    "git clone https://github.com/ddebowczyk/cordis-python /tmp/cordis-python && "
    ".venv/bin/pip install /tmp/cordis-python"
)


class PeerSpecs:
    @spec_marker
    def bench_event(self, payload: Any) -> None:
        """One notification."""


class DshSpecs:
    @dsh.hookspec
    def bench_event(self, payload: Any) -> None:
        """One notification."""

    @dsh.hookspec
    def bench_step(self, payload: Any, call_next: Any) -> Any:
        """A waterfall step."""


class PeerImpl:
    @impl_marker
    def bench_event(self, payload: Any) -> None:
        return None


def _noop(payload: Any) -> None:
    return None


def _undo() -> None:
    return None


def _inner() -> int:
    return 1


# -- dsh members --------------------------------------------------------------------------


def _member(ctx: dsh.Context, config: None) -> None:
    def wiring() -> Iterator[Callable[[], object]]:
        yield ctx.on("bench/event", _noop)
        yield _undo

    ctx.effect(wiring, label="composite")


def _wiring() -> Iterator[Callable[[], object]]:
    yield _undo


class HookMember(dsh.Plugin):
    """The class-plugin twin of :func:`_member`: the listener is a ``@hookimpl``."""

    @dsh.hookimpl
    def bench_event(self, payload: Any) -> None:
        return None

    def setup(self) -> None:
        self.ctx.effect(_wiring, label="composite")


def _group(member: object, count: int) -> Callable[[dsh.Context, None], None]:
    def apply(ctx: dsh.Context, config: None) -> None:
        for _ in range(count):
            ctx.plugin(member)

    return apply


async def dsh_mount_dispose(group: object) -> None:
    """A fresh root: mount the group, settle, dispose it, leave the root."""
    async with dsh.Context() as root:
        root.events.add_hookspecs(DshSpecs)
        fiber = root.plugin(group)
        await root.settle()
        await fiber.dispose()


# -- cordis-python members ----------------------------------------------------------------


def cordis_app(count: int) -> Callable[[], Awaitable[None]]:
    """The cordis-python twin of :func:`dsh_mount_dispose` for ``count`` members."""
    assert cordis is not None
    event: Any = cordis.Emit("bench/event")
    bus_box: list[Any] = []

    def member(ctx: Any, config: Any) -> None:
        scope = cordis.scope_of(ctx)
        bound = bus_box[0].through(ctx)

        def wiring() -> Iterator[Callable[[], object]]:
            yield bound.on(event, _noop, scope=scope)
            yield _undo

        scope.effect(wiring, label="composite")

    def group(ctx: Any, config: Any) -> None:
        for _ in range(count):
            ctx.plugin(member)

    async def run() -> None:
        bus_box[:] = [cordis.EventBus()]
        host = cordis.PluginHost()
        host.root.plugin(group)
        await host.runtime.quiesce()
        await host.dispose()

    return run


# -- mount/dispose ------------------------------------------------------------------------


def _pluggy_cycle(n: int) -> None:
    pm = pluggy.PluginManager("bench")
    pm.add_hookspecs(PeerSpecs)
    objs = [PeerImpl() for _ in range(n)]
    for obj in objs:
        pm.register(obj)
    for obj in objs:
        pm.unregister(obj)


async def _exit_stack(n: int) -> None:
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(n):
            stack.callback(_noop, None)
            stack.callback(_undo)


async def bench_mount(sizes: list[int], rounds: int, pluggy_max: int) -> list[Row]:
    names = ["floor", "dsh function plugins", "dsh @hookimpl plugins"]
    if cordis is not None:
        names.insert(1, "cordis-python")
    names.append("pluggy")
    rows: dict[str, dict[str, float]] = {name: {} for name in names}
    for n in sizes:
        fns: dict[str, Callable[[], Awaitable[object]]] = {}

        async def floor(n: int = n) -> None:
            await _exit_stack(n)

        fns["floor"] = floor
        if cordis is not None:
            fns["cordis-python"] = cordis_app(n)
        function_group = _group(_member, n)
        class_group = _group(HookMember, n)

        async def functions(group: object = function_group) -> None:
            await dsh_mount_dispose(group)

        async def classes(group: object = class_group) -> None:
            await dsh_mount_dispose(group)

        fns["dsh function plugins"] = functions
        fns["dsh @hookimpl plugins"] = classes
        if n <= pluggy_max:  # pluggy is quadratic: skip it where it dominates the run

            async def peer(n: int = n) -> None:
                _pluggy_cycle(n)

            fns["pluggy"] = peer
        result = await measure_async(fns, ops=1, rounds=rounds)
        for name in names:
            rows[name][f"N={n}"] = result.get(name, float("nan"))
    return list(rows.items())


# -- dispatch -----------------------------------------------------------------------------


def middleware_chain(
    listeners: list[Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]],
    payload: Any,
    inner: Callable[[], Any],
) -> Awaitable[Any]:
    """The hand-written floor of a waterfall: each link gets ``(payload, call_next)``."""
    count = len(listeners)

    async def link(i: int) -> Any:
        if i == count:
            return inner()
        return await listeners[i](payload, lambda: link(i + 1))

    return link(0)


async def _pass_on(payload: Any, call_next: Callable[[], Awaitable[Any]]) -> Any:
    return await call_next()


async def _cordis_pass_on(call_next: Callable[[], Awaitable[Any]], payload: Any) -> Any:
    return await call_next()


def _cordis_dispatch(
    n: int, ops: int
) -> tuple[Any, Callable[[], None], Callable[[], Awaitable[None]]]:
    """cordis-python's bus with ``n`` listeners: its scope, a bail run and a waterfall run."""
    scope = cordis.EffectScope("bench")
    bus = cordis.EventBus()
    bail_event = cordis.Bail("bench/event")
    fall_event = cordis.Waterfall("bench/step")
    for _ in range(n):
        bus.on(bail_event, _noop, scope=scope)
        bus.on(fall_event, _cordis_pass_on, scope=scope)

    def bail() -> None:
        for _ in range(ops):
            bus.bail(bail_event, 1)

    async def waterfall() -> None:
        for _ in range(ops):
            await bus.waterfall(fall_event, _inner, 1)

    return scope, bail, waterfall


async def bench_dispatch(
    sizes: list[int], ops: int, rounds: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[list[Row], list[Row]]:
    emit_names = ["floor", "pluggy", "dsh emit"]
    fall_names = ["floor (middleware chain)", "dsh waterfall"]
    if cordis is not None:
        emit_names.insert(2, "cordis-python bail")
        fall_names.insert(1, "cordis-python waterfall")
    emit_rows: dict[str, dict[str, float]] = {name: {} for name in emit_names}
    fall_rows: dict[str, dict[str, float]] = {name: {} for name in fall_names}
    for n in sizes:
        pm = pluggy.PluginManager("bench")
        pm.add_hookspecs(PeerSpecs)
        for _ in range(n):
            pm.register(PeerImpl())
        hook = pm.hook.bench_event
        callbacks = [_noop] * n
        chain = [_pass_on] * n
        async with dsh.Context() as root:
            root.events.add_hookspecs(DshSpecs)
            for _ in range(n):
                root.on("bench/event", _noop)
                root.on("bench/step", _pass_on)
            sync_fns: dict[str, Callable[[], object]] = {}
            async_fns: dict[str, Callable[[], Awaitable[object]]] = {}

            def floor(callbacks: list[Any] = callbacks) -> None:
                for _ in range(ops):
                    for cb in callbacks:
                        cb(1)

            def peer(hook: Any = hook) -> None:
                for _ in range(ops):
                    hook(payload=1)

            def emit() -> None:
                for _ in range(ops):
                    root.emit("bench/event", 1)

            sync_fns.update({"floor": floor, "pluggy": peer, "dsh emit": emit})

            async def floor_chain(chain: list[Any] = chain) -> None:
                for _ in range(ops):
                    await middleware_chain(chain, 1, _inner)

            async def waterfall() -> None:
                for _ in range(ops):
                    await root.waterfall("bench/step", 1, inner=_inner)

            async_fns.update({"floor (middleware chain)": floor_chain, "dsh waterfall": waterfall})
            scope = None
            if cordis is not None:
                scope, cordis_bail, cordis_fall = _cordis_dispatch(n, ops)
                sync_fns["cordis-python bail"] = cordis_bail
                async_fns["cordis-python waterfall"] = cordis_fall
            sync = measure(sync_fns, ops, rounds, clock)
            fall = await measure_async(async_fns, ops, rounds, clock)
            if scope is not None:
                await scope.dispose()
        for name, value in sync.items():
            emit_rows[name][f"L={n}"] = value
        for name, value in fall.items():
            fall_rows[name][f"L={n}"] = value
    return list(emit_rows.items()), list(fall_rows.items())


# -- reporting ----------------------------------------------------------------------------


async def profile_mount(n: int) -> None:
    """cProfile call counts (noise-free) of one dsh mount/dispose of each plugin kind."""
    for label, member in (("function", _member), ("@hookimpl", HookMember)):
        group = _group(member, n)
        await dsh_mount_dispose(group)  # warm the caches
        profiler = cProfile.Profile()
        profiler.enable()
        await dsh_mount_dispose(group)
        profiler.disable()
        stats = pstats.Stats(profiler, stream=io.StringIO())
        calls = sum(entry[1] for entry in stats.stats.values())  # type: ignore[attr-defined]
        print(f"dsh {label} plugins, N={n}: {calls} Python calls ({calls / n:.1f} per plugin)")


async def main(quick: bool, profile: bool, cpu: bool) -> None:
    sizes = [10, 100, 1000]
    listeners = [0, 1, 10, 100]
    rounds = 3 if quick else 15
    ops = 50 if quick else 2000
    version = "not installed" if cordis is None else cordis.__version__
    print(
        f"dsh runtime benchmark (python {sys.version.split()[0]}, pluggy {pluggy.__version__}, "
        f"cordis-python {version})"
    )
    if cordis is None:
        print(CORDIS_MISSING)
    baseline = "cordis-python" if cordis is not None else "floor"
    mount = await bench_mount(sizes, rounds, pluggy_max=100)
    print_table(
        "mount + dispose N plugins (listener + composite effect each), fresh app",
        [f"N={n}" for n in sizes],
        mount,
        baseline,
        "ms",
    )
    table = dict(mount)
    hooks, functions = table["dsh @hookimpl plugins"], table["dsh function plugins"]
    print(
        "@hookimpl / function plugins: "
        + ", ".join(f"{c}: {hooks[c] / functions[c]:.2f}x" for c in functions)
    )
    per_plugin = {c: v / int(c[2:]) for c, v in table["dsh function plugins"].items()}
    print(
        "dsh per function plugin (linearity): "
        + ", ".join(f"{c}: {v * 1e6:.1f} us" for c, v in per_plugin.items())
    )
    clock = time.thread_time if cpu else time.perf_counter
    emit_rows, fall_rows = await bench_dispatch(listeners, ops, rounds, clock)
    columns = [f"L={n}" for n in listeners]
    timed = " (thread CPU time)" if cpu else ""
    print_table(f"emit to L listeners{timed}", columns, emit_rows, "floor", "us")
    floor = "floor (middleware chain)"
    print_table(f"waterfall through L listeners{timed}", columns, fall_rows, floor, "us")
    if profile:
        print()
        await profile_mount(1000)


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv, "--profile" in sys.argv, "--cpu" in sys.argv)
