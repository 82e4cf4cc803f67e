"""Joining a Ray cluster, or starting a local one that only this machine can reach."""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

from dsh import PluginLoadError

__all__ = ["LOOPBACK_ENV", "connected", "is_loopback", "load_ray"]

#: Set while a cluster on the loopback address runs (and so inherited by its
#: processes): Ray's own switch that makes every process of the cluster use the loopback
#: address, and no usage reports.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def load_ray() -> ModuleType:
    """The ``ray`` package, or :class:`dsh.PluginLoadError` naming the extra."""
    try:
        import ray
    except ImportError as exc:
        raise PluginLoadError(
            "fleet-ray runs sessions on Ray, which is not installed: pip install 'dsh-harness[ray]'"
        ) from exc
    return ray


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, ``host:port`` or a name) is this machine's loopback."""
    if host.startswith("["):  # [v6 address]:port
        name = host[1 : host.find("]")]
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in ``os.environ`` (where not set already) for the block."""
    added = {key: value for key, value in values.items() if key not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


@contextlib.contextmanager
def _loopback_only(loopback: bool) -> Iterator[Any]:
    """Ray, with this process using the loopback address for the block when
    ``loopback``.

    Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` once, when it is imported: in a
    process that imported Ray before (an embedding program, a test run) the variable
    set now reaches the cluster's processes but not this one, which would then advertise
    (and have the cluster bind) the machine's address instead of the loopback one. So
    the flag Ray computed from it is switched off here too, for the block.
    """
    ray = load_ray()
    constants = ray._private.ray_constants
    saved = constants.ENABLE_RAY_CLUSTER
    if loopback:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield ray
    finally:
        constants.ENABLE_RAY_CLUSTER = saved


@contextlib.contextmanager
def connected(
    address: str | None, *, host: str = "127.0.0.1", cpus: int | None = None
) -> Iterator[Any]:
    """Ray, connected for the block; yields the ``ray`` module.

    A process that initialised Ray itself keeps its connection (nothing is started or
    stopped). With ``address``, join that cluster (``ray.init(address=...)``) and leave
    it afterwards. Otherwise start a local cluster on ``host`` (no dashboard, ``cpus``
    CPUs, default all) and stop it afterwards. A cluster on the loopback address gets
    :data:`LOOPBACK_ENV` (a variable the user set wins).
    """
    target = host if address is None else address
    loopback = is_loopback(target)
    with _environ(LOOPBACK_ENV if loopback else {}), _loopback_only(loopback) as ray:
        if ray.is_initialized():
            yield ray
            return
        if address is None:
            ray.init(
                address="local",
                include_dashboard=False,
                _node_ip_address=host,
                num_cpus=cpus,
                logging_level="WARNING",
            )
        else:
            ray.init(address=address, logging_level="WARNING")
        try:
            yield ray
        finally:
            ray.shutdown()
