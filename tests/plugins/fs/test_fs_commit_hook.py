"""The fs seam's commit hooks: the exact bytes replaced, under the target's lock, an
error refuses the write, the exact disposer removes one."""

from __future__ import annotations

import pytest

from dsh_fs import Commit, Version
from tests.plugins.fs.fs_support import Layout, fs_stack

pytestmark = pytest.mark.anyio


async def test_hooks_see_each_replace_before_it_lands(ws: Layout) -> None:
    target = ws.root / "f.txt"
    seen: list[tuple[str, Commit, bytes | None]] = []
    async with fs_stack(policy=False, tools=False) as root:

        async def first(commit: Commit) -> None:
            on_disk = target.read_bytes() if target.exists() else None
            seen.append(("first", commit, on_disk))

        async def second(commit: Commit) -> None:
            seen.append(("second", commit, None))

        stop = root.fs.add_commit_hook(first)
        root.fs.add_commit_hook(second)
        call = ws.call()
        await root.fs.write_text("f.txt", "one", call)
        stop()
        await root.fs.edit_text("f.txt", lambda _, text: text + "two", call)
    created, also, edited = seen
    assert (created[0], also[0], edited[0]) == ("first", "second", "second")
    assert created[1] == Commit(str(target), None, None, b"one", Version.of(b"one"), call)
    assert created[2] is None  # before the replace
    assert (edited[1].before, edited[1].before_version) == (b"one", Version.of(b"one"))
    assert (edited[1].after, target.read_bytes()) == (b"onetwo", b"onetwo")


async def test_a_failing_hook_refuses_the_write(ws: Layout) -> None:
    async with fs_stack(policy=False, tools=False) as root:

        async def refuse(commit: Commit) -> None:
            raise OSError("store full")

        root.fs.add_commit_hook(refuse)
        with pytest.raises(OSError, match="store full"):
            await root.fs.write_text("f.txt", "one", ws.call())
    assert not (ws.root / "f.txt").exists()
