"""A scope's key is freed by the scope's own first effect: a restart of its fiber frees
it (as before), and the restarted scope's later disposal leaves a new scope of the key
alone."""

from __future__ import annotations

import pytest

import dsh
from dsh_scope import ScopeError, create_scope

pytestmark = pytest.mark.anyio


async def test_a_restarted_scope_leaves_the_keys_next_scope_alone() -> None:
    key = object()
    async with dsh.Context() as root:
        old = create_scope(root, key)
        with pytest.raises(ScopeError, match="already"):
            create_scope(root, key)
        await old.fiber.restart()  # its undo ran: the key is free
        new = create_scope(root, key)
        await old.dispose()
        # The new scope still holds the key.
        with pytest.raises(ScopeError, match="already"):
            create_scope(root, key)
        await new.dispose()
        create_scope(root, key)
