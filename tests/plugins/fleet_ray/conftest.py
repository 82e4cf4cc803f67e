"""The Ray cluster of these tests: one local cluster for the module that needs it,
started (and stopped) the way the ``ray`` engine starts one, on the loopback address
only. That module's tests share one ``pytest -n`` worker (its ``xdist_group``), so one
cluster serves them all and is gone before that worker runs other tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsh_fleet_ray import connected


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """The address of a local cluster with 2 CPUs (about 5 s to start and to stop),
    this process its driver."""
    with connected(None, host="127.0.0.1", cpus=2) as ray:
        yield str(ray.get_runtime_context().gcs_address)
