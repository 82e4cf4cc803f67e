"""Canonical paths and exact opens: ``openat2`` where the kernel has it, the
``O_NOFOLLOW`` walk where it does not, and both agreeing."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
from pathlib import Path
from typing import Any

import pytest

import dsh_fs_local._openat2 as openat2
import dsh_fs_local._paths as paths
from tests.plugins.fs.fs_support import Layout, envelope, fs_stack, run

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["openat2", "walk"])
def opener(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test twice: with the kernel's ``openat2``, and with the walk that stands in
    for it on kernels without."""
    if request.param == "walk":
        monkeypatch.setattr(openat2, "OPENAT2", None)
    else:
        assert openat2.OPENAT2 is not None, "this kernel has openat2"
    mode: str = request.param
    return mode


def tree(tmp_path: Path) -> Path:
    """``d/f`` (a file), ``up`` -> ``d``, ``rel`` -> ``../t/d/f``, ``abs`` -> ``/…/d``,
    ``loop`` <-> ``pool``, ``chain`` -> ``up`` (a link to a link)."""
    base = tmp_path / "t"
    (base / "d").mkdir(parents=True)
    (base / "d" / "f").write_text("x")
    (base / "up").symlink_to("d")
    (base / "rel").symlink_to("../t/d/f")
    (base / "abs").symlink_to(base / "d")
    (base / "loop").symlink_to("pool")
    (base / "pool").symlink_to("loop")
    (base / "chain").symlink_to("up")
    return base


@pytest.mark.parametrize(
    "name",
    [
        "d/f",
        "up/f",
        "rel",
        "abs/f",
        "chain/./f",
        "up/../d/f",
        "missing/../d/f",
        "missing/deeper",
        "d/f/under-a-file",
        "abs/",
        "loop/x",
        "",
    ],
)
def test_canonical_agrees_with_realpath(tmp_path: Path, name: str) -> None:
    base = tree(tmp_path)
    path = f"{base}/{name}"
    if name.startswith("loop"):
        # realpath keeps a loop's first link; this stops after MAX_LINKS of them.
        assert paths.canonical(path) in (f"{base}/loop/x", f"{base}/pool/x")
    else:
        assert paths.canonical(path) == os.path.realpath(path)


def test_canonical_of_relative_paths_and_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tree(tmp_path)
    monkeypatch.chdir(base)
    assert paths.canonical("up/f") == f"{base}/d/f"
    assert paths.canonical("/../..") == "/"


def test_open_exact_opens_the_path_and_refuses_every_symlink(tmp_path: Path, opener: str) -> None:
    base = tree(tmp_path)
    fd = paths.open_exact(f"{base}/d/f", os.O_RDONLY)
    try:
        assert os.read(fd, 10) == b"x"
    finally:
        os.close(fd)
    for name in ("up/f", "rel", "abs/f"):
        with pytest.raises(OSError, match="symbolic links") as caught:
            paths.open_exact(f"{base}/{name}", os.O_RDONLY)
        assert caught.value.errno == errno.ELOOP
    with pytest.raises(OSError, match="symbolic links") as caught:
        paths.open_exact(f"{base}/up", os.O_RDONLY | os.O_DIRECTORY)
    assert caught.value.errno == errno.ELOOP
    with pytest.raises(NotADirectoryError):
        paths.open_exact(f"{base}/d/f/x", os.O_RDONLY)
    with pytest.raises(FileNotFoundError):
        paths.open_exact(f"{base}/none/x", os.O_RDONLY)
    for directory in ("/", f"{base}/d/"):
        fd = paths.open_exact(directory, os.O_RDONLY | os.O_DIRECTORY)
        os.close(fd)


def test_open_canonical_follows_a_swap_by_canonicalising_again(tmp_path: Path, opener: str) -> None:
    base = tree(tmp_path)
    (base / "d").rename(base / "real")
    (base / "d").symlink_to("real")  # "d/f" was canonical; now "d" is a link
    fd, path = paths.open_canonical(f"{base}/d/f", os.O_RDONLY)
    os.close(fd)
    assert path == f"{base}/real/f"
    with pytest.raises(OSError, match="symbolic links") as caught:
        paths.open_canonical(f"{base}/loop", os.O_RDONLY)
    assert caught.value.errno == errno.ELOOP
    with pytest.raises(FileNotFoundError):
        paths.open_canonical(f"{base}/none", os.O_RDONLY)


async def test_the_tools_work_the_same_without_openat2(ws: Layout, opener: str) -> None:
    (ws.root / "sub").mkdir()
    (ws.root / "sub" / "f.txt").write_text("needle\n")
    (ws.root / "link").symlink_to(ws.root / "sub", target_is_directory=True)
    (ws.root / "loop").symlink_to("loop")
    async with fs_stack() as root:
        read = await run(root, "read", ws.call(), file_path="link/f.txt")
        looped = await run(root, "read", ws.call(), file_path="loop")
        listed = await run(root, "glob", ws.call(), pattern="**")
        found = await run(root, "grep", ws.call(), pattern="needle", path="link")
        written = await run(root, "write", ws.call(), file_path="sub/new.txt", content="x")
    assert read.content == envelope(
        ws.root / "sub" / "f.txt", "1: needle\n\n(End of file - total 1 lines)"
    )
    assert (looped.content, looped.code) == (
        f'Error: cannot read "{ws.root}/loop": Too many levels of symbolic links',
        "FS_IO",
    )
    assert listed.content == f"{ws.root}/sub/f.txt"
    assert found.content == f"Found 1 match\n{ws.root}/sub/f.txt:1: needle"
    assert written.content == envelope(ws.root / "sub" / "new.txt", "Created file")


def test_openat2_is_bound_on_this_machine_only_where_it_exists() -> None:
    assert openat2.bind("riscv64", "linux") is None
    assert openat2.bind("x86_64", "darwin") is None
    bound = openat2.bind(platform.machine(), sys.platform)
    assert bound is not None
    assert bound.number == 437


class _Refusing:
    """A libc whose ``syscall`` fails with ``code`` (an old kernel, a seccomp filter)."""

    def __init__(self, code: int) -> None:
        self.code = code

    @property
    def syscall(self) -> Any:
        def call(*args: Any) -> int:
            ctypes.set_errno(self.code)
            return -1

        return call


@pytest.mark.parametrize("code", [errno.ENOSYS, errno.EPERM])
def test_a_kernel_that_refuses_openat2_means_the_walk(code: int) -> None:
    assert openat2.bind("x86_64", "linux", _Refusing(code)) is None  # type: ignore[arg-type]


def test_openat2_names_the_path_it_could_not_open_and_refuses_a_nul(tmp_path: Path) -> None:
    call = openat2.OPENAT2
    assert call is not None
    with pytest.raises(FileNotFoundError) as caught:
        call(str(tmp_path / "none"), os.O_RDONLY, 0)
    assert caught.value.filename == str(tmp_path / "none")
    with pytest.raises(ValueError, match="embedded null byte"):
        call("a\0b", os.O_RDONLY, 0)


def test_read_all_reads_past_one_chunk(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"y" * (paths.CHUNK * 2 + 5))
    fd = os.open(tmp_path / "big", os.O_RDONLY)
    try:
        assert len(paths.read_all(fd)) == paths.CHUNK * 2 + 5
    finally:
        os.close(fd)
