"""Landlock: a ruleset built in the parent from a policy, applied in the child before
exec (``no_new_privs``, the socket filter when the network is off, then
``landlock_restrict_self``).

Landlock only grants: what a rule does not name is denied. Reading is granted on ``/``
as a whole unless a denied path lies below; then each directory on the way to it gets
``READ_DIR`` alone (its names can be listed) and each of its other entries the whole
read access, recursively, so the denied path alone is left out.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
import weakref
from collections.abc import Callable, Iterable

from dsh_sandbox import Launch, SandboxPolicy

from . import _syscalls
from ._syscalls import SocketFilter

__all__ = ["CACHE_SIZE", "LandlockRules", "Rulesets"]

_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE = 0b111111 << 6  # char, dir, reg, sock, fifo, block
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_BIND_TCP = 1 << 0  # ABI 4, handled_access_net
_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6, scoped
_SCOPE_SIGNAL = 1 << 1

_RULE_PATH_BENEATH = 1
_O_PATH = 0o10000000

_READ = _EXECUTE | _READ_FILE | _READ_DIR
_WRITE = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE | _MAKE_SYM | _REFER | _TRUNCATE
#: The rights a rule on a file (not a directory) may hold.
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _handled_fs(abi: int) -> int:
    handled = _READ | (_WRITE & ~(_REFER | _TRUNCATE))
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    return handled


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


class LandlockRules:
    """The rules of one policy: ``(path, access)`` pairs, reading split around the
    denied paths (canonical), writing on the writable roots and ``/dev/null``."""

    def __init__(self, abi: int, writable: Iterable[str], denied: Iterable[str]) -> None:
        self.abi = abi
        self.handled = _handled_fs(abi)
        self.denied = sorted(set(denied))
        self.rules: list[tuple[str, int]] = []
        #: The directories whose entries the rules name one by one.
        self.listed: list[str] = []
        self._grant_read("/")
        for root in writable:
            self.rules.append((root, _WRITE))
        self.rules.append(("/dev/null", _READ_FILE | _WRITE_FILE | _TRUNCATE))

    def _grant_read(self, directory: str) -> None:
        below = [path for path in self.denied if _inside(path, directory)]
        if not below:
            self.rules.append((directory, _READ))
            return
        if directory in below:
            return  # denied itself
        self.rules.append((directory, _READ_DIR))
        self.listed.append(directory)
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda entry: entry.name)
        except OSError:  # unreadable to dsh too: nothing more to grant below it
            return
        for entry in entries:
            if entry.is_symlink():
                self._grant_link(entry.path)
            elif entry.is_dir():
                self._grant_read(entry.path)
            elif entry.path not in self.denied:
                self.rules.append((entry.path, _READ))

    def _grant_link(self, link: str) -> None:
        """A symlink beside a denied path: read on its target, unless the target holds
        or is inside a denied path (then it is read through its real path, or not)."""
        real = os.path.realpath(link)
        if not any(_inside(path, real) or _inside(real, path) for path in self.denied):
            self.rules.append((real, _READ))

    def ruleset(self, network: bool) -> int:
        """A ruleset file descriptor holding the rules (close it when done). Without
        ``network``, TCP bind and connect are handled and nothing grants them (ABI 4)."""
        attr = _RulesetAttr(self.handled, 0, 0)
        size = 8
        if self.abi >= 4:
            size = 16
            if not network:
                attr.handled_access_net = _BIND_TCP | _CONNECT_TCP
        if self.abi >= 6:
            size = 24
            attr.scoped = _SCOPE_SIGNAL | (0 if network else _SCOPE_ABSTRACT_UNIX)
        fd = _syscalls.create_ruleset(attr, size)
        try:
            for path, access in self.rules:
                self._add(fd, path, access)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _add(self, ruleset: int, path: str, access: int) -> None:
        try:
            target = os.open(path, _O_PATH | os.O_CLOEXEC)
        except OSError:  # gone meanwhile (or a root that does not exist): nothing to grant
            return
        try:
            if not stat.S_ISDIR(os.fstat(target).st_mode):
                access &= _FILE_RIGHTS
            _syscalls.add_rule(
                ruleset, _RULE_PATH_BENEATH, _PathBeneath(access & self.handled, target)
            )
        finally:
            os.close(target)


class _Ruleset:
    """A ruleset's descriptor, closed when nothing refers to it any more (neither the
    cache nor a launch not yet collected)."""

    def __init__(self, fd: int, listed: list[str]) -> None:
        self.fd = fd
        self.listed = listed
        self.stamps = _stamps(listed)
        weakref.finalize(self, os.close, fd)

    def fresh(self) -> bool:
        """Whether no entry came or went in the directories listed since it was built."""
        return _stamps(self.listed) == self.stamps


def _stamps(directories: list[str]) -> tuple[int, ...]:
    stamps = []
    for directory in directories:
        try:
            stamps.append(os.stat(directory).st_mtime_ns)
        except OSError:
            stamps.append(-1)
    return tuple(stamps)


#: How many rulesets :class:`Rulesets` keeps (then it starts again from none).
CACHE_SIZE = 32


class Rulesets:
    """The rulesets of the policies seen, reused while the directories their rules list
    entry by entry are unchanged (their mtimes): building one costs a system call or
    three per rule, and a policy's rules are the same from one command to the next."""

    def __init__(self) -> None:
        self._cache: dict[tuple[object, ...], _Ruleset] = {}

    def launch(
        self, abi: int, policy: SandboxPolicy, writable: list[str], denied: list[str]
    ) -> Launch:
        """The launch confining a command by ``policy`` with Landlock."""
        key = (abi, policy.network, tuple(writable), tuple(denied))
        ruleset = self._cache.get(key)
        if ruleset is None or not ruleset.fresh():
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            rules = LandlockRules(abi, writable, denied)
            ruleset = _Ruleset(rules.ruleset(policy.network), rules.listed)
            self._cache[key] = ruleset
        sockets = None if policy.network else _socket_filter()
        return Launch(mechanism="landlock", preexec=_restrict(ruleset, sockets))

    def clear(self) -> None:
        """Drop every ruleset (each is closed once no launch refers to it)."""
        self._cache.clear()


@functools.cache
def _socket_filter() -> SocketFilter:
    return SocketFilter()


def _restrict(ruleset: _Ruleset, sockets: SocketFilter | None) -> Callable[[], None]:
    def preexec() -> None:  # pragma: no cover - runs in the forked child, before exec
        _syscalls.set_no_new_privs()
        if sockets is not None:
            sockets.install()
        _syscalls.restrict_self(ruleset.fd)

    return preexec
