"""``openat2(2)`` through ``ctypes``: open a path and refuse every symlink on the way,
in one system call (Linux 5.6 and later).

The call is bound at import when the machine is Linux on x86_64 or aarch64 and a probe
succeeds; elsewhere, or when the kernel (or a seccomp filter) refuses it,
:data:`OPENAT2` is ``None`` and callers walk the path one component at a time.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections.abc import Callable

__all__ = ["OPENAT2", "RESOLVE_NO_MAGICLINKS", "RESOLVE_NO_SYMLINKS", "OpenAt2", "bind"]

#: ``resolve`` flags of ``struct open_how`` (linux/openat2.h).
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04

#: The system call's number per machine (the same in both tables).
_NUMBERS = {"x86_64": 437, "aarch64": 437}
_AT_FDCWD = -100


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


class OpenAt2:
    """``openat2(AT_FDCWD, path, {flags, 0, resolve})`` through a libc ``syscall``."""

    def __init__(self, number: int, syscall: Callable[..., int]) -> None:
        self.number = number
        self.syscall = syscall

    def __call__(self, path: str, flags: int, resolve: int) -> int:
        """A descriptor of ``path``; the kernel's refusal as an ``OSError``."""
        encoded = os.fsencode(path)
        if b"\0" in encoded:  # a C string would silently end there
            raise ValueError("embedded null byte")
        how = _OpenHow(flags, 0, resolve)
        fd = self.syscall(self.number, _AT_FDCWD, encoded, ctypes.byref(how), ctypes.sizeof(how))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return fd


def bind(machine: str, system: str, libc: ctypes.CDLL | None = None) -> OpenAt2 | None:
    """The call on this machine, or ``None`` when it has none (another system or
    machine, an old kernel, a filter refusing it)."""
    number = _NUMBERS.get(machine)
    if number is None or system != "linux":
        return None
    syscall = (libc or ctypes.CDLL(None, use_errno=True)).syscall
    syscall.restype = ctypes.c_long
    syscall.argtypes = [
        ctypes.c_long,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    call = OpenAt2(number, syscall)
    try:
        os.close(call("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, RESOLVE_NO_SYMLINKS))
    except OSError:  # ENOSYS from an old kernel, EPERM from a seccomp filter
        return None
    return call


#: The call on this machine, or ``None``.
OPENAT2 = bind(platform.machine(), sys.platform)
