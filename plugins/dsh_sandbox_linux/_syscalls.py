"""The few Linux system calls the mechanisms make through ``ctypes``: Landlock's three,
``prctl`` and ``seccomp``'s filter install. Numbers for x86_64 and aarch64."""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = [
    "ARCH",
    "SocketFilter",
    "add_rule",
    "create_ruleset",
    "landlock_abi",
    "restrict_self",
    "set_no_new_privs",
]

#: Per machine: (Landlock's first syscall, ``socket``'s number, the seccomp audit arch).
_MACHINES = {
    "x86_64": (444, 41, 0xC000003E),
    "aarch64": (444, 198, 0xC00000B7),
}
#: This machine's entry, None on another architecture (Landlock is then not tried).
ARCH = _MACHINES.get(platform.machine())

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_CREATE_RULESET_VERSION = 1

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_prctl = _libc.prctl
_prctl.restype = ctypes.c_int


def _checked(result: int) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def _number(offset: int) -> int:
    assert ARCH is not None, "no Landlock syscall numbers for this machine"
    return ARCH[0] + offset


def landlock_abi() -> int:
    """The Landlock ABI version the kernel has; ``OSError`` when it has none (or it is
    disabled at boot)."""
    if ARCH is None:
        raise OSError(0, f"no Landlock syscall numbers for this machine ({platform.machine()})")
    return _checked(_syscall(_number(0), None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION))


def create_ruleset(attr: ctypes.Structure, size: int) -> int:
    """A new ruleset's file descriptor (close-on-exec)."""
    return _checked(_syscall(_number(0), ctypes.byref(attr), ctypes.c_size_t(size), 0))


def add_rule(ruleset: int, rule_type: int, attr: ctypes.Structure) -> None:
    """Add one rule (``attr``, of ``rule_type``) to ``ruleset``."""
    _checked(_syscall(_number(1), ruleset, rule_type, ctypes.byref(attr), 0))


def restrict_self(ruleset: int) -> None:
    """Confine this thread (and what it starts) by ``ruleset``."""
    _checked(_syscall(_number(2), ruleset, 0))


def set_no_new_privs() -> None:  # pragma: no cover - only in the forked child, before exec
    """What Landlock and seccomp require of an unprivileged caller."""
    _checked(_prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))


class _Instruction(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _Program(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction)))


_LOAD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_X32 = 0x40000000


class SocketFilter:
    """A seccomp filter failing with ``EACCES`` every ``socket()`` of a family other
    than ``AF_UNIX`` (IP, UDP included — which Landlock does not cover —, netlink,
    packet), and every system call of another architecture's ABI (a 32-bit
    ``socketcall`` would pass it by)."""

    def __init__(self) -> None:
        assert ARCH is not None, "no seccomp numbers for this machine"
        _, socket_nr, audit_arch = ARCH
        deny = _ERRNO | 13  # EACCES
        code = [
            (_LOAD, 0, 0, 4),  # seccomp_data.arch
            (_JUMP_EQ, 1, 0, audit_arch),
            (_RETURN, 0, 0, deny),
            (_LOAD, 0, 0, 0),  # seccomp_data.nr
            (_JUMP_EQ, 2, 0, socket_nr),
            (_JUMP_EQ, 1, 0, socket_nr | _X32),
            (_RETURN, 0, 0, _ALLOW),
            (_LOAD, 0, 0, 16),  # the low half of seccomp_data.args[0]: the family
            (_JUMP_EQ, 0, 1, 1),  # AF_UNIX
            (_RETURN, 0, 0, _ALLOW),
            (_RETURN, 0, 0, deny),
        ]
        self._code = (_Instruction * len(code))(*(_Instruction(*row) for row in code))
        self._program = _Program(len(code), self._code)

    def install(self) -> None:  # pragma: no cover - only in the forked child, before exec
        """Apply the filter to this thread (after :func:`set_no_new_privs`)."""
        _checked(_prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._program), 0, 0))
