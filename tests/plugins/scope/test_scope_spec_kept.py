"""A scope's body is the runtime's own: described once per runtime, not per scope, and
never counted among the plugin objects a fiber holds (nothing to release)."""

from __future__ import annotations

import pytest

from dsh import Context
from dsh_scope import create_scope

pytestmark = pytest.mark.anyio


class Key:
    pass


async def test_every_scope_shares_one_spec_and_holds_no_plugin_entry() -> None:
    async with Context() as root:
        runtime = root.fiber.runtime
        first = create_scope(root, Key())
        second = create_scope(root, Key())
        assert first.fiber.spec is second.fiber.spec
        assert list(runtime.static_specs.values()) == [first.fiber.spec]
        assert runtime.plugin_specs == {}
        await first.dispose()
        await second.dispose()
        third = create_scope(root, Key())
        assert third.fiber.spec is first.fiber.spec
        await third.dispose()
        assert runtime.plugin_specs == {}
