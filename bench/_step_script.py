"""The script every impl of :mod:`bench.agent_step` follows, and what a run did."""

from dataclasses import dataclass

from dsh_llm import (
    Usage,
)

PROMPT = "Echo hello with the echo tool, then tell me you are done."
INSTRUCTIONS = "You are a benchmark agent. Use the echo tool when asked to echo."
ECHO_DESCRIPTION = "Return the given text unchanged."
ECHOED = "hello"
ECHO_ARGS = {"text": ECHOED}
ECHO_JSON = '{"text": "hello"}'
FINAL = "Done: every echo came back."
MODEL = "scripted"
SHORT = "short"
CHUNKS_PER_REPLY = 5

DSH_USAGE = Usage(1, 1)

IMPLS = ("floor", "pydantic-ai", "openai-agents", "dsh")
FLOOR, PAI, OAI, DSH = IMPLS


class Script:
    """What every scripted model answers: ``tool_steps`` echo calls, then ``FINAL``."""

    __slots__ = ("calls", "tool_steps")

    def __init__(self) -> None:
        self.tool_steps = 0
        self.calls = 0

    def start(self, tool_steps: int) -> None:
        self.tool_steps = tool_steps
        self.calls = 0

    def next_call(self) -> str | None:
        """The id of the next echo call, or None when the model should answer."""
        self.calls += 1
        return f"call-{self.calls}" if self.calls <= self.tool_steps else None


SCRIPT = Script()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one run did, read back from the impl's own result."""

    tool_results: list[str]
    final: str
    chunks: int | None = None
