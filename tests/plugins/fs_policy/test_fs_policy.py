"""``fs-policy``: read before writing, write only what was read, per session."""

from __future__ import annotations

import pytest

from dsh import Context
from dsh_fs import Filesystem, Precondition, Version
from dsh_fs_policy import ObservationPolicy, Observations, session_key
from tests.plugins.fs.fs_support import Layout, agent_call, envelope, fs_stack, run

pytestmark = pytest.mark.anyio


async def test_overwriting_or_editing_an_unread_file_is_not_observed(ws: Layout) -> None:
    target = ws.root / "f.txt"
    target.write_text("mine\n")
    async with fs_stack() as root:
        write = await run(root, "write", ws.call(), file_path="f.txt", content="x")
        edit = await run(root, "edit", ws.call(), file_path="f.txt", old_string="m", new_string="")
    assert (write.content, write.code) == (
        f'Error: cannot overwrite existing "{target}" without reading it first — read the '
        "file, then retry",
        "FS_NOT_OBSERVED",
    )
    assert (edit.content, edit.code) == (
        f'Error: edit requires reading "{target}" first — read the file, then retry',
        "FS_NOT_OBSERVED",
    )
    assert target.read_text() == "mine\n"


async def test_a_file_changed_on_disk_since_it_was_read_is_stale(ws: Layout) -> None:
    target = ws.root / "f.txt"
    target.write_text("one\n")
    stale = f'Error: "{target}" changed since it was read — re-read the file, then retry'
    async with fs_stack() as root:
        call = ws.call()
        await run(root, "read", call, file_path="f.txt")
        target.write_text("two\n")  # same size, same second: only the content tells
        write = await run(root, "write", call, file_path="f.txt", content="three\n")
        edit = await run(root, "edit", call, file_path="f.txt", old_string="t", new_string="T")
        target.unlink()
        gone = await run(root, "write", call, file_path="f.txt", content="four\n")
        await run(root, "read", call, file_path="f.txt")  # now seen absent
        again = await run(root, "write", call, file_path="f.txt", content="five\n")
    for result in (write, edit, gone):
        assert (result.content, result.code) == (stale, "FS_STALE_VERSION")
    assert again.content == envelope(target, "Created file")
    assert target.read_text() == "five\n"


async def test_a_file_created_after_it_was_seen_missing_is_not_observed(ws: Layout) -> None:
    target = ws.root / "f.txt"
    async with fs_stack() as root:
        call = ws.call()
        await run(root, "read", call, file_path="f.txt")
        target.write_text("someone else\n")
        write = await run(root, "write", call, file_path="f.txt", content="x")
        edit = await run(root, "edit", call, file_path="f.txt", old_string="s", new_string="S")
    assert write.code == "FS_NOT_OBSERVED"
    assert edit.content == (
        f'Error: edit requires reading "{target}" first — read the file, then retry'
    )
    assert target.read_text() == "someone else\n"


async def test_writes_and_edits_record_the_new_version(ws: Layout) -> None:
    async with fs_stack() as root:
        call = ws.call()
        steps = [
            await run(root, "write", call, file_path="n.txt", content="a b\n"),
            await run(root, "edit", call, file_path="n.txt", old_string="a", new_string="A"),
            await run(root, "edit", call, file_path="n.txt", old_string="b", new_string="B"),
            await run(root, "write", call, file_path="n.txt", content="new\n"),
        ]
    assert [s.is_error for s in steps] == [False] * 4
    assert (ws.root / "n.txt").read_text() == "new\n"


async def test_observations_belong_to_a_session(ws: Layout) -> None:
    (ws.root / "f.txt").write_text("x\n")
    async with fs_stack() as root:
        await run(root, "read", ws.call("reader"), file_path="f.txt")
        other = await run(root, "write", ws.call("other"), file_path="f.txt", content="y")
        reader = await run(root, "write", ws.call("reader"), file_path="f.txt", content="y")
    assert other.code == "FS_NOT_OBSERVED"
    assert not reader.is_error


async def test_the_sandbox_check_comes_before_the_policy(ws: Layout) -> None:
    (ws.outside / "f.txt").write_text("x\n")
    async with fs_stack() as root:
        result = await run(
            root, "edit", ws.call(), file_path="../outside/f.txt", old_string="x", new_string="y"
        )
    assert result.code == "FS_SANDBOX_DENIED"


async def test_without_the_policy_anything_in_the_workspace_may_be_written(ws: Layout) -> None:
    (ws.root / "f.txt").write_text("x\n")
    async with fs_stack(policy=False) as root:
        write = await run(root, "write", ws.call(), file_path="f.txt", content="y\n")
        edit = await run(root, "edit", ws.call(), file_path="f.txt", old_string="y", new_string="z")
    assert (write.is_error, edit.is_error) == (False, False)


def test_the_policy_keys_on_the_session_id() -> None:
    seen = Observations()
    version = Version.of(b"x")
    call = agent_call("/w", "s")
    assert (session_key(call), session_key(None)) == ("s", None)
    assert seen.precondition("write", "/w/f", call) == Precondition.absent()
    seen.observed("/w/f", version, call)
    assert seen.precondition("edit", "/w/f", call) == Precondition.of(version)
    seen.observed("/w/g", None, None)
    assert seen.precondition("edit", "/w/g", None) == Precondition.absent()
    assert seen.precondition("write", "/w/g", call) == Precondition.absent()


async def test_the_plugin_sets_and_unsets_the_policy() -> None:
    async with Context() as root:
        await root.plugin(Filesystem)
        fiber = root.plugin(ObservationPolicy)
        await fiber
        assert isinstance(root.fs.policy, Observations)
        await fiber.dispose()
        assert root.fs.policy is None
