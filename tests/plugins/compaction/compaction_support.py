"""A runtime with agent-core, a scripted model and compaction, for the compaction tests.

The window is small so turns of a few hundred characters pass it: 1,000 tokens, a
threshold of 800 prompt tokens, and 640 characters (0.16 x 1,000 x 4) of recent turns
kept whole. ``BIG`` is a usage whose prompt passes the threshold.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from dsh import Context
from dsh.testing import ScriptedModel, text
from dsh_agent_core import AgentCore
from dsh_compaction import INSTRUCTION, Compaction
from dsh_llm import LlmRequest, Message, TextBlock
from dsh_session import Session
from dsh_session_jsonl import JsonlSessions
from dsh_tools import Tool, ToolCall
from tests.support import MainRig

MODEL = "m"
WINDOW = 1000
SUMMARY_MAX = 100
PRUNE = 100
CONFIG: dict[str, Any] = {
    "context_window": WINDOW,
    "summary_max_tokens": SUMMARY_MAX,
    "prune_tool_results_over": PRUNE,
}
#: A prompt over the threshold (0.8 x 1,000 tokens): input + cache read + cache write.
BIG = (501, 5, 200, 100)
SMALL = (100, 5)
COMPLETED = {"kind": "completed"}


@dataclass
class Rig(MainRig):
    @property
    def compaction(self) -> Compaction:
        compaction: Compaction = self.root.compaction
        return compaction

    def summary_requests(self) -> list[LlmRequest]:
        return [r for r in self.model.requests if is_summary(r)]

    def turn_requests(self) -> list[LlmRequest]:
        return [r for r in self.model.requests if not is_summary(r)]


class EchoArgs(BaseModel):
    text: str = ""


async def echo(args: EchoArgs, call: ToolCall) -> str:
    return args.text


@asynccontextmanager
async def rig(
    compaction: Mapping[str, Any] | None = CONFIG,
    *,
    store: Path | None = None,
    window: int | None = None,
) -> AsyncIterator[Rig]:
    """agent-core with agent ``main`` on model ``m`` (a ``ScriptedModel`` declaring
    ``window``), the ``echo`` tool, session-jsonl under ``store`` when given, and
    compaction with ``compaction`` (not loaded when None)."""
    async with Context() as root:
        await root.plugin(AgentCore, {"model": MODEL})
        model = ScriptedModel(models=[MODEL], window=window)
        model.install(root)
        root.tools.register(
            Tool(name="echo", description="echo the text", parameters=EchoArgs, execute=echo)
        )
        if store is not None:
            await root.plugin(JsonlSessions, {"root": str(store), "fsync": False})
        if compaction is not None:
            await root.plugin(Compaction, dict(compaction))
        yield Rig(root, model)


def is_summary(request: LlmRequest) -> bool:
    """Whether ``request`` is a summary request (it ends with the instruction)."""
    return bool(request.messages) and request.messages[-1] == Message.user(INSTRUCTION)


def said(text_: str) -> Message:
    """The assistant message of a text answer."""
    return Message("assistant", (TextBlock(text_),))


def answer(words: str, usage: tuple[int | None, ...] = SMALL) -> list[Any]:
    """A text answer reporting ``usage``."""
    return text(words, usage=usage)


def first_seq(session: Session, kind: str, **data: Any) -> int:
    """The seq of the first event of ``kind`` whose data has these values."""
    return next(
        e.seq
        for e in session.events
        if e.type == kind and all(e.data.get(k) == v for k, v in data.items())
    )


#: Two turns of about 400 characters each: with the window above only the newer one
#: fits among the turns kept whole, so the first is what a compaction summarises.
A = "a" * 400
B = "b" * 400
