"""Helpers of the fleet-ray tests: which TCP ports a process tree listens on."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from pathlib import Path

PROC = Path("/proc")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def descendants(pid: int) -> set[int]:
    """``pid``'s processes below it (children, their children, ...)."""
    tree = _children()
    found: set[int] = set()
    todo = list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        if child not in found:
            found.add(child)
            todo.extend(tree.get(child, []))
    return found


def _address(hexaddr: str, family: int) -> str:
    raw = bytes.fromhex(hexaddr)
    if family == socket.AF_INET:
        return str(ipaddress.ip_address(struct.pack("<I", *struct.unpack(">I", raw))))
    words = struct.unpack(">4I", raw)
    return str(ipaddress.ip_address(b"".join(struct.pack("<I", w) for w in words)))


def _listening() -> dict[str, str]:
    """Socket inode -> local address of every listening TCP socket."""
    found: dict[str, str] = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in (PROC / "net" / name).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            host, port = fields[1].split(":")
            found[fields[9]] = f"{_address(host, family)}:{int(port, 16)}"
    return found


def listeners(pids: set[int]) -> dict[int, list[str]]:
    """The addresses each of ``pids`` listens on (TCP)."""
    sockets = _listening()
    found: dict[int, list[str]] = {}
    for pid in pids:
        try:
            fds = list((PROC / str(pid) / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            inode = target.removeprefix("socket:[").removesuffix("]")
            if target.startswith("socket:[") and inode in sockets:
                found.setdefault(pid, []).append(sockets[inode])
    return found
