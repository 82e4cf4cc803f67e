"""The content-addressed store: ``<store>/blobs/<sha256>``, each written atomically."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from ._errors import CheckpointBlobError

__all__ = ["BlobStore", "Collected", "write_atomic"]


def write_atomic(path: Path, data: bytes) -> None:
    """Make ``data`` the content of ``path``: a synced temp file in the same directory,
    renamed over it, then the directory synced (parents are created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name[:64]}.{secrets.token_hex(6)}.dsh-tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        temp.unlink()
        raise
    os.close(fd)
    os.replace(temp, path)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@dataclass(frozen=True)
class Collected:
    """What a collection did: the ``removed`` digests, the bytes they held
    (``freed``) and the bytes the store holds now (``kept``)."""

    removed: tuple[str, ...]
    freed: int
    kept: int


class BlobStore:
    """Contents by their SHA-256 under ``directory/blobs``. A blob is complete once it
    exists under its name (temp file, fsync, rename), so a reference written after
    :meth:`put` returned never dangles."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.blobs = directory / "blobs"
        self._size: int | None = None

    def path(self, digest: str) -> Path:
        return self.blobs / digest

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Store ``data`` (once per content) and return its digest; ``digest``, when
        given, must be ``data``'s SHA-256 (the caller computed it already)."""
        digest = digest or hashlib.sha256(data).hexdigest()
        path = self.path(digest)
        if not path.exists():
            write_atomic(path, data)
            if self._size is not None:
                self._size += len(data)
        return digest

    def get(self, digest: str, *, wanted_for: str) -> bytes:
        """The content ``digest``; :class:`CheckpointBlobError` naming ``wanted_for``
        (the file it would restore) when it is missing or damaged."""
        try:
            data = self.path(digest).read_bytes()
        except FileNotFoundError:
            raise CheckpointBlobError(
                f'cannot restore "{wanted_for}": its checkpoint {digest[:12]} is no longer '
                f"in {self.blobs} (collected to bound the store)"
            ) from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise CheckpointBlobError(
                f'cannot restore "{wanted_for}": the checkpoint {self.path(digest)} is damaged'
            )
        return data

    def size(self) -> int:
        """The bytes the blobs hold (counted once, then kept up to date)."""
        if self._size is None:
            self._size = sum(size for _, _, size in self._entries())
        return self._size

    def _entries(self) -> list[tuple[float, str, int]]:
        found = []
        with contextlib.suppress(FileNotFoundError), os.scandir(self.blobs) as it:
            for entry in it:
                if entry.is_file() and not entry.name.startswith("."):
                    st = entry.stat()
                    found.append((st.st_mtime, entry.name, st.st_size))
        return found

    def collect(self, max_bytes: int, keep: Collection[str]) -> Collected:
        """Remove the oldest blobs outside ``keep`` until the store holds at most
        ``max_bytes`` (or nothing else can go)."""
        entries = sorted(self._entries())
        total = sum(size for _, _, size in entries)
        removed: list[str] = []
        freed = 0
        for _, digest, size in entries:
            if total - freed <= max_bytes:
                break
            if digest in keep:
                continue
            with contextlib.suppress(FileNotFoundError):
                self.path(digest).unlink()
            removed.append(digest)
            freed += size
        self._size = total - freed
        return Collected(tuple(removed), freed, total - freed)
