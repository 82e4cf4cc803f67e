"""``write`` and ``edit``: envelopes, exact errors, line endings and approvals."""

from __future__ import annotations

import pytest

from dsh_approval import ApprovalRequest
from dsh_fs import Change
from dsh_tool_fs import describe_change
from tests.plugins.fs.fs_support import Layout, envelope, fs_stack, run

pytestmark = pytest.mark.anyio


async def test_write_creates_then_updates_and_makes_parent_directories(ws: Layout) -> None:
    async with fs_stack() as root:
        created = await run(root, "write", ws.call(), file_path="deep/er/new.txt", content="v1")
        updated = await run(root, "write", ws.call(), file_path="deep/er/new.txt", content="v2\n")
    target = ws.root / "deep" / "er" / "new.txt"
    assert created.content == envelope(target, "Created file")
    assert updated.content == envelope(target, "Updated file")
    assert target.read_text() == "v2\n"
    assert [p.name for p in target.parent.iterdir()] == ["new.txt"]  # no temp file left


async def test_write_keeps_the_permissions_of_the_file_it_replaces(ws: Layout) -> None:
    script = ws.root / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o751)
    async with fs_stack(policy=False) as root:
        await run(root, "write", ws.call(), file_path="run.sh", content="echo 2\n")
    assert (script.read_text(), script.stat().st_mode & 0o777) == ("echo 2\n", 0o751)


async def test_edit_replaces_one_occurrence_or_all(ws: Layout) -> None:
    target = ws.root / "code.py"
    target.write_text("a = 1\nb = 1\n")
    async with fs_stack() as root:
        call = ws.call()
        await run(root, "read", call, file_path="code.py")
        one = await run(
            root, "edit", call, file_path="code.py", old_string="a = 1", new_string="a = 2"
        )
        every = await run(
            root,
            "edit",
            call,
            file_path="code.py",
            old_string="= ",
            new_string=":= ",
            replace_all=True,
        )
    assert one.content == f"The file {target} has been updated successfully."
    assert every.content == (
        f"The file {target} has been updated. All occurrences were successfully replaced."
    )
    assert target.read_text() == "a := 2\nb := 1\n"


async def test_edit_errors_are_exact(ws: Layout) -> None:
    target = ws.root / "t.txt"
    target.write_text("x y x y x\n")
    async with fs_stack() as root:
        call = ws.call()
        await run(root, "read", call, file_path="t.txt")
        ambiguous = await run(root, "edit", call, file_path="t.txt", old_string="x", new_string="z")
        missing = await run(root, "edit", call, file_path="t.txt", old_string="q", new_string="z")
        same = await run(root, "edit", call, file_path="t.txt", old_string="x", new_string="x")
        empty = await run(root, "edit", call, file_path="t.txt", old_string="", new_string="z")
        nowhere = await run(
            root, "edit", call, file_path="gone.txt", old_string="a", new_string="b"
        )
    assert (ambiguous.content, ambiguous.code) == (
        f'Error: old_string matched 3 times in "{target}"; provide a more specific '
        "old_string or set replace_all to true",
        "FS_AMBIGUOUS_EDIT",
    )
    assert (missing.content, missing.code) == (
        f'Error: old_string was not found in "{target}" — copy it exactly from the file as it '
        "is now (without the line-number prefixes of read)",
        "FS_EDIT_NOT_FOUND",
    )
    assert (same.content, same.code) == (
        "Error: new_string must differ from old_string",
        "INVALID_ARGS",
    )
    assert empty.code == "INVALID_ARGS"
    assert empty.content.startswith("invalid arguments: old_string:")
    assert nowhere.code == "FS_NOT_OBSERVED"
    assert target.read_text() == "x y x y x\n"


async def test_edit_of_a_file_read_as_missing_is_not_found(ws: Layout) -> None:
    async with fs_stack() as root:
        call = ws.call()
        await run(root, "read", call, file_path="later.txt")
        result = await run(
            root, "edit", call, file_path="later.txt", old_string="a", new_string="b"
        )
    assert (result.content, result.code) == (
        f'Error: cannot edit "{ws.root}/later.txt": not found',
        "FS_NOT_FOUND",
    )


async def test_edit_of_a_binary_file_is_not_text(ws: Layout) -> None:
    (ws.root / "b.bin").write_bytes(b"\0\1")
    async with fs_stack() as root:
        call = ws.call()
        await run(root, "read", call, file_path="b.bin")
        result = await run(root, "edit", call, file_path="b.bin", old_string="a", new_string="b")
    assert result.code == "FS_NOT_TEXT"


@pytest.mark.parametrize(
    "case",
    [
        # CRLF files match LF-normalised text and keep CRLF, new breaks included.
        (b"one\r\ntwo\r\nthree\r\n", "one\ntwo", "1\n2\n2b", b"1\r\n2\r\n2b\r\nthree\r\n"),
        (b"one\r\ntwo\r\n", "one\r\ntwo", "x", b"x\r\n"),
        # LF files stay LF, even when the model sends CRLF.
        (b"one\ntwo\n", "one\r\n", "1\r\n1b\r\n", b"1\n1b\ntwo\n"),
        # A mixed file is written with its dominant ending.
        (b"a\r\nb\r\nc\n", "b", "B", b"a\r\nB\r\nc\r\n"),
        (b"a\nb\nc\r\n", "b", "B", b"a\nB\nc\n"),
        # An empty new_string deletes.
        (b"keep drop keep", " drop", "", b"keep keep"),
    ],
)
async def test_edit_line_endings(ws: Layout, case: tuple[bytes, str, str, bytes]) -> None:
    before, old, new, after = case
    target = ws.root / "f.txt"
    target.write_bytes(before)
    async with fs_stack() as root:
        call = ws.call()
        await run(root, "read", call, file_path="f.txt")
        result = await run(root, "edit", call, file_path="f.txt", old_string=old, new_string=new)
    assert not result.is_error, result.content
    assert target.read_bytes() == after


async def test_writes_and_edits_ask_for_approval_and_a_no_changes_nothing(ws: Layout) -> None:
    target = ws.root / "f.txt"
    target.write_text("old\n")
    asked: list[ApprovalRequest] = []

    def refuse(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    async with fs_stack(approval={"policy": "ask"}) as root:
        call = ws.call()
        root.approval.set_responder(refuse)
        await run(root, "read", call, file_path="f.txt")
        write = await run(root, "write", call, file_path="f.txt", content="new\n")
        edit = await run(root, "edit", call, file_path="f.txt", old_string="old", new_string="x")
        create = await run(root, "write", call, file_path="n.txt", content="hi\n")
    assert (write.content, write.code) == (
        f"Error: the user declined: write {target}",
        "APPROVAL_DENIED",
    )
    assert edit.content == f"Error: the user declined: edit {target}"
    assert create.content == f"Error: the user declined: write {ws.root}/n.txt"
    assert [(r.kind, r.title, r.call) for r in asked] == [
        ("write", f"write {target}", call),
        ("edit", f"edit {target}", call),
        ("write", f"write {ws.root}/n.txt", call),
    ]
    assert asked[1].detail == (f"--- {target}\n+++ {target}\n@@ -1 +1 @@\n-old\n+x\n")
    assert asked[2].detail.startswith(f"--- /dev/null\n+++ {ws.root}/n.txt\n")
    assert target.read_text() == "old\n"
    assert not (ws.root / "n.txt").exists()


async def test_an_approved_write_goes_ahead(ws: Layout) -> None:
    async with fs_stack(approval={"policy": "allow"}) as root:
        result = await run(root, "write", ws.call(), file_path="ok.txt", content="yes")
    assert result.content == envelope(ws.root / "ok.txt", "Created file")


def test_describe_change_is_a_unified_diff() -> None:
    change = Change("write", "/w/f", "a\nb\n", "a\nc\n")
    assert describe_change(change) == "--- /w/f\n+++ /w/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
