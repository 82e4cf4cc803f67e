"""Runtime benchmark: mount/dispose and event dispatch, beside raw pluggy in one run.

Run: ``.venv/bin/python -m bench.runtime`` (asyncio backend; ``--quick`` for a smoke run).

* mount/dispose: N plugins, each registering a listener and a composite effect (a
  generator yielding the listener's exact disposer and a plain undo), mounted under one
  parent fiber, settled, then disposed with the parent. Peer: raw pluggy registering
  and unregistering N objects with one hookimpl each (no ownership, no teardown).
* dispatch: one event to L listeners. ``emit`` (sync) and ``waterfall`` (async, each
  listener awaits ``call_next``) beside ``pm.hook.x(payload=...)`` with L impls and a
  plain ``for`` loop floor.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pluggy

import dsh
from bench._timing import Row, measure, measure_async, print_table

spec_marker = pluggy.HookspecMarker("bench")
impl_marker = pluggy.HookimplMarker("bench")


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


async def _pass_on(payload: Any, call_next: Any) -> Any:
    return await call_next()


def _member(ctx: dsh.Context, config: None) -> None:
    def wiring() -> Any:
        yield ctx.on("bench/event", _noop)
        yield _undo

    ctx.effect(wiring, label="composite")


def _undo() -> None:
    return None


def _group(count: int) -> Any:
    def apply(ctx: dsh.Context, config: None) -> None:
        for _ in range(count):
            ctx.plugin(_member)

    return apply


async def bench_mount(sizes: list[int], rounds: int) -> list[Row]:
    rows: dict[str, dict[str, float]] = {"pluggy": {}, "dsh": {}}
    for n in sizes:
        async with dsh.Context() as root:
            root.events.add_hookspecs(DshSpecs)
            group = _group(n)

            async def mount_dispose(group: Any = group) -> None:
                fiber = root.plugin(group)
                await root.settle()
                await fiber.dispose()

            def pluggy_cycle(n: int = n) -> None:
                pm = pluggy.PluginManager("bench")
                pm.add_hookspecs(PeerSpecs)
                objs = [PeerImpl() for _ in range(n)]
                for obj in objs:
                    pm.register(obj)
                for obj in objs:
                    pm.unregister(obj)

            async def pluggy_async(cycle: Any = pluggy_cycle) -> None:
                cycle()

            result = await measure_async(
                {"dsh": mount_dispose, "pluggy": pluggy_async}, ops=1, rounds=rounds
            )
        for name, value in result.items():
            rows[name][f"N={n}"] = value
    return [("pluggy", rows["pluggy"]), ("dsh", rows["dsh"])]


async def bench_dispatch(sizes: list[int], ops: int, rounds: int) -> tuple[list[Row], list[Row]]:
    emit_rows: dict[str, dict[str, float]] = {"floor": {}, "pluggy": {}, "dsh emit": {}}
    fall_rows: dict[str, dict[str, float]] = {"floor": {}, "pluggy": {}, "dsh waterfall": {}}
    for n in sizes:
        pm = pluggy.PluginManager("bench")
        pm.add_hookspecs(PeerSpecs)
        for _ in range(n):
            pm.register(PeerImpl())
        hook = pm.hook.bench_event
        callbacks = [_noop] * n
        async with dsh.Context() as root:
            root.events.add_hookspecs(DshSpecs)
            for _ in range(n):
                root.on("bench/event", _noop)
                root.on("bench/step", _pass_on)

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

            sync = measure({"floor": floor, "pluggy": peer, "dsh emit": emit}, ops, rounds)

            async def floor_async(callbacks: list[Any] = callbacks) -> None:
                for _ in range(ops):
                    for cb in callbacks:
                        cb(1)

            async def peer_async(hook: Any = hook) -> None:
                for _ in range(ops):
                    hook(payload=1)

            async def waterfall() -> None:
                for _ in range(ops):
                    await root.waterfall("bench/step", 1, inner=_inner)

            fall = await measure_async(
                {"floor": floor_async, "pluggy": peer_async, "dsh waterfall": waterfall},
                ops,
                rounds,
            )
        for name, value in sync.items():
            emit_rows[name][f"L={n}"] = value
        for name, value in fall.items():
            fall_rows[name][f"L={n}"] = value
    return list(emit_rows.items()), list(fall_rows.items())


def _inner() -> int:
    return 1


async def main(quick: bool) -> None:
    sizes = [10, 100, 1000]
    listeners = [1, 10, 100]
    rounds = 3 if quick else 15
    ops = 50 if quick else 2000
    print(f"dsh runtime benchmark (python {sys.version.split()[0]}, pluggy {pluggy.__version__})")
    mount = await bench_mount(sizes, rounds)
    print_table(
        "mount + dispose N plugins (listener + composite effect each)",
        [f"N={n}" for n in sizes],
        mount,
        "pluggy",
        "ms",
    )
    per_plugin = {c: v / int(c[2:]) for c, v in dict(mount)["dsh"].items()}
    print(
        "dsh per plugin (linearity): "
        + ", ".join(f"{c}: {v * 1e6:.1f} us" for c, v in per_plugin.items())
    )
    emit_rows, fall_rows = await bench_dispatch(listeners, ops, rounds)
    columns = [f"L={n}" for n in listeners]
    print_table("emit to L listeners", columns, emit_rows, "pluggy", "us")
    print_table("waterfall through L listeners", columns, fall_rows, "pluggy", "us")


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv)
