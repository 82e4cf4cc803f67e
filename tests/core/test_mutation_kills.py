"""Behaviours a mutation run found unpinned (``.ci/mutation.py``); each test here fails
on the mutant it names."""

from __future__ import annotations

import pytest

import dsh
from dsh import Context, EventUsageError, FiberState
from dsh.testing import state

pytestmark = pytest.mark.anyio


class Specs:
    @dsh.hookspec
    def ping(self, value: object) -> None: ...


async def test_parallel_checks_the_argument_count() -> None:
    # Mutant: the argument count check dropped from EventBus.parallel.
    async with Context() as root:
        root.events.add_hookspecs(Specs)
        root.on("ping", lambda value: None)
        with pytest.raises(EventUsageError, match=r'event "ping" takes 1 argument\(s\) \(value\)'):
            await root.parallel("ping")


class Provider(dsh.Service):
    key = "shared_key"


class OtherProvider(dsh.Service):
    key = "shared_key"


async def test_a_key_whose_provider_left_can_be_provided_again() -> None:
    # Mutant: `del self._slots[key]` dropped from Runtime.remove_service.
    async with Context() as root:
        first = await root.plugin(Provider)
        await first.dispose()
        assert root.get("shared_key") is None
        second = await root.plugin(OtherProvider)
        assert state(second) is FiberState.ACTIVE
        assert isinstance(root.get("shared_key"), OtherProvider)
