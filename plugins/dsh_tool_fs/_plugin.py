"""The ``tool-fs`` plugin: read, write, edit, glob and grep over the ``fs`` seam."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

from dsh import Disposer, Plugin
from dsh_approval import ApprovalRequest
from dsh_fs import Change
from dsh_tools import Tool, ToolArgumentsError, ToolCall

from ._config import ToolFsConfig
from ._guidance import SECTIONS, EditArgs, GlobArgs, GrepArgs, ReadArgs, WriteArgs, descriptions
from ._render import (
    GLOB_LIMIT,
    GREP_LIMIT,
    apply_edit,
    render_glob,
    render_grep,
    render_page,
    render_write,
)

__all__ = ["FsTools", "describe_change"]


def describe_change(change: Change) -> str:
    """A unified diff of ``change``, for the person asked to approve it."""
    before = [] if change.before is None else change.before.splitlines(keepends=True)
    return "".join(
        difflib.unified_diff(
            before,
            change.after.splitlines(keepends=True),
            fromfile="/dev/null" if change.before is None else change.path,
            tofile=change.path,
        )
    )


class FsTools(Plugin):
    """Registers the five file tools and their guidance sections."""

    name = "tool-fs"
    Config = ToolFsConfig
    inject = ("tools", "system_prompt", "fs")

    config: ToolFsConfig

    def setup(self) -> Iterator[Disposer]:
        about = descriptions(self.config)
        tools: list[Tool[Any]] = [
            Tool(name="read", description=about["read"], parameters=ReadArgs, execute=self.read),
            Tool(
                name="write", description=about["write"], parameters=WriteArgs, execute=self.write
            ),
            Tool(name="edit", description=about["edit"], parameters=EditArgs, execute=self.edit),
            Tool(name="glob", description=about["glob"], parameters=GlobArgs, execute=self.glob),
            Tool(name="grep", description=about["grep"], parameters=GrepArgs, execute=self.grep),
        ]
        for tool in tools:
            yield self.ctx.tools.register(tool)
        for section in SECTIONS:
            yield self.ctx.system_prompt.section(section)

    async def _approve(self, change: Change, call: ToolCall) -> None:
        approval = self.ctx.get("approval")
        if approval is not None:
            request = ApprovalRequest(
                kind=change.kind,
                title=f"{change.kind} {change.path}",
                detail=describe_change(change),
                call=call,
            )
            await approval.require(request)

    async def read(self, args: ReadArgs, call: ToolCall) -> str:
        config = self.config
        file = await self.ctx.fs.read_text(args.file_path, call, observe=True)
        limit = min(args.limit or config.read_limit, config.read_limit)
        return render_page(
            file, args.offset, limit, config.read_max_line_length, config.read_max_bytes
        )

    async def write(self, args: WriteArgs, call: ToolCall) -> str:
        async def approve(change: Change) -> None:
            await self._approve(change, call)

        outcome = await self.ctx.fs.write_text(args.file_path, args.content, call, approve=approve)
        return render_write(outcome.path, outcome.created)

    async def edit(self, args: EditArgs, call: ToolCall) -> str:
        if args.old_string == args.new_string:
            raise ToolArgumentsError("new_string must differ from old_string")

        async def approve(change: Change) -> None:
            await self._approve(change, call)

        def change(path: str, text: str) -> str:
            return apply_edit(text, args.old_string, args.new_string, args.replace_all, path)

        outcome = await self.ctx.fs.edit_text(args.file_path, change, call, approve=approve)
        if args.replace_all:
            return (
                f"The file {outcome.path} has been updated. All occurrences were "
                "successfully replaced."
            )
        return f"The file {outcome.path} has been updated successfully."

    async def glob(self, args: GlobArgs, call: ToolCall) -> str:
        try:
            listing = await self.ctx.fs.list_files(args.pattern, args.path, call, limit=GLOB_LIMIT)
        except ValueError as exc:
            raise ToolArgumentsError(f"invalid glob pattern: {exc}") from None
        return render_glob(listing)

    async def grep(self, args: GrepArgs, call: ToolCall) -> str:
        try:
            result = await self.ctx.fs.search(
                args.pattern,
                args.path,
                call,
                glob=args.glob,
                case_insensitive=args.case_insensitive,
                limit=GREP_LIMIT,
            )
        except re.error as exc:
            raise ToolArgumentsError(f'invalid regex "{args.pattern}": {exc}') from None
        except ValueError as exc:
            raise ToolArgumentsError(f"invalid glob: {exc}") from None
        return render_grep(result, self.config.read_max_line_length)
