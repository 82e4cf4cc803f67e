"""A tool plugin file for the llm-replay tests: ``lookup`` answers ``value of <key>: 42``.

The deployment tests copy this file next to their YAML; the in-process tests start
the module itself as a plugin.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from dsh import Context, Disposer
from dsh_tools import Tool

name = "lookup-tool"
inject = ["tools"]


class LookupArgs(BaseModel):
    key: str


async def lookup(args: LookupArgs, call: object) -> str:
    return f"value of {args.key}: 42"


def apply(ctx: Context, config: None) -> Iterator[Disposer]:
    yield ctx.tools.register(
        Tool(name="lookup", description="Look a key up.", parameters=LookupArgs, execute=lookup)
    )
