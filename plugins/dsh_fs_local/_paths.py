"""Canonical paths, opening exactly a canonical path, and reading what was opened.

:func:`canonical` names what a path leads to (symlinks followed); :func:`open_exact`
opens a path following no symlink at all, so what it opens is what the path names
and nothing a swapped symlink points to; :func:`open_canonical` joins the two: a
symlink found on the way (one swapped in since the path was canonicalised) is
followed by canonicalising again and opening that exactly, and the caller checks the
path it returns — the path of what was opened.
"""

from __future__ import annotations

import errno
import os
import stat

from . import _openat2

__all__ = [
    "CHUNK",
    "MAX_LINKS",
    "OPEN_ATTEMPTS",
    "canonical",
    "open_canonical",
    "open_exact",
    "read_all",
]

#: Symlinks followed while canonicalising one path (the kernel's limit): a longer
#: chain, or a loop, is left unresolved from there.
MAX_LINKS = 40
#: How many times :func:`open_canonical` canonicalises again before giving up.
OPEN_ATTEMPTS = 5

#: The size of one read of :func:`read_all`.
CHUNK = 1 << 16

_STEP = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_LINKS = _openat2.RESOLVE_NO_SYMLINKS | _openat2.RESOLVE_NO_MAGICLINKS


def canonical(path: str) -> str:
    """The absolute path ``path`` leads to, every symlink followed (a relative path is
    relative to the process cwd): the target's, or its nearest existing ancestor's
    plus the rest, like ``os.path.realpath`` — but one ``readlink`` per component,
    and a link replaced meanwhile is simply what it has become."""
    if not path.startswith("/"):
        path = f"{os.getcwd()}/{path}"
    pending = path.split("/")[::-1]
    resolved = ""
    links = 0
    while pending:
        name = pending.pop()
        if not name or name == ".":
            continue
        if name == "..":
            resolved = resolved.rpartition("/")[0]
            continue
        candidate = f"{resolved}/{name}"
        if links < MAX_LINKS:
            try:
                target = os.readlink(candidate)
            except OSError:  # not a link (EINVAL), or nothing there to follow
                pass
            else:
                links += 1
                if target.startswith("/"):
                    resolved = ""
                pending.extend(target.split("/")[::-1])
                continue
        resolved = candidate
    return resolved or "/"


def _walk(path: str, flags: int) -> int:
    """:func:`open_exact` without ``openat2``: each directory opened with
    ``O_NOFOLLOW`` relative to the one before."""
    *directories, last = path.split("/")
    fd = os.open("/", _STEP)
    try:
        for name in directories:
            if name:
                child = _step(fd, name, _STEP)
                os.close(fd)
                fd = child
        return _step(fd, last or ".", flags | os.O_NOFOLLOW)
    finally:
        os.close(fd)


def _step(fd: int, name: str, flags: int) -> int:
    try:
        return os.open(name, flags, dir_fd=fd)
    except NotADirectoryError:
        # O_DIRECTORY | O_NOFOLLOW says ENOTDIR for a symlink: tell the two apart.
        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise


def open_exact(path: str, flags: int) -> int:
    """A descriptor of the absolute ``path`` opened with ``flags``, following no
    symlink, magic ``/proc`` links included: a symlink anywhere on the way is
    ``OSError(ELOOP)``. One ``openat2`` call where the kernel has it."""
    flags |= os.O_CLOEXEC
    call = _openat2.OPENAT2
    if call is None:
        return _walk(path, flags)
    return call(path, flags, _NO_LINKS)


def open_canonical(target: str, flags: int) -> tuple[int, str]:
    """A descriptor of what the canonical ``target`` leads to now, and its canonical
    path: ``target`` itself unless a symlink was swapped into it, then what
    canonicalising it again gave (the path the caller must check). After
    :data:`OPEN_ATTEMPTS` the last ``ELOOP`` is raised (a symlink loop, or a swap
    each time)."""
    path = target
    for _ in range(OPEN_ATTEMPTS - 1):
        try:
            return open_exact(path, flags), path
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
        path = canonical(target)
    return open_exact(path, flags), path


def read_all(fd: int) -> bytes:
    """The rest of the regular file open at ``fd``: plain reads of a chunk until a
    short one (a regular file's end)."""
    data = os.read(fd, CHUNK)
    if len(data) < CHUNK:
        return data
    chunks = [data]
    while len(chunks[-1]) == CHUNK:
        chunks.append(os.read(fd, CHUNK))
    return b"".join(chunks)
