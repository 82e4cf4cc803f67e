"""Where a command server's stderr goes: its log file, and the ``dsh`` log at DEBUG
(shown with ``dsh -v``), never the terminal the chat is on."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import anyio

__all__ = ["StderrLog", "log_path"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def log_path(server: str) -> Path:
    """The log file of the server ``server``: ``dsh/mcp/<server>.log`` in
    ``$XDG_STATE_HOME``, else in ``~/.local/state`` (characters a file name should not
    hold become ``_``)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join("~", ".local", "state")
    name = _UNSAFE.sub("_", server).lstrip(".") or "_"
    return Path(state).expanduser() / "dsh" / "mcp" / f"{name}.log"


class StderrLog:
    """Takes what a server writes to stderr: appends it to :func:`log_path` (a file
    that cannot be written is said once, as a warning, and skipped) and logs each line
    at DEBUG as ``MCP server "<name>": <line>``."""

    def __init__(self, server: str, logger: logging.Logger) -> None:
        self.server = server
        self.path = log_path(server)
        self._logger = logger
        self._file: Any = None
        self._broken = False
        self._pending = b""

    async def _open(self) -> None:
        try:
            await anyio.Path(self.path.parent).mkdir(parents=True, exist_ok=True)
            self._file = await anyio.open_file(self.path, "ab")
        except OSError as exc:
            self._broken = True
            self._logger.warning(
                'MCP server "%s": cannot write its stderr to %s: %s (it is dropped)',
                self.server,
                self.path,
                exc.strerror or exc,
            )

    async def write(self, chunk: bytes) -> None:
        """Take the next chunk the server wrote."""
        if self._file is None and not self._broken:
            await self._open()
        if self._file is not None:
            await self._file.write(chunk)
            await self._file.flush()
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        for line in lines:
            self._say(line)

    def _say(self, line: bytes) -> None:
        text = line.decode(errors="replace").rstrip("\r")
        self._logger.debug('MCP server "%s": %s', self.server, text)

    async def aclose(self) -> None:
        """The server's stderr ended: log a last line without its newline, close the
        file."""
        if self._pending:
            self._say(self._pending)
            self._pending = b""
        if self._file is not None:
            await self._file.aclose()
            self._file = None
