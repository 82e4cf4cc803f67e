"""Turn limits: how many steps a turn may take and how many tokens it may use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_agent import AgentError
from dsh_llm import Usage

if TYPE_CHECKING:
    from ._agent import LoopAgent

__all__ = [
    "DEFAULT_MAX_STEPS",
    "MaxStepsError",
    "UsageLimitError",
    "check_turn_limits",
    "turn_tokens",
]

#: The steps a turn may take when neither the config nor a parent agent says otherwise.
DEFAULT_MAX_STEPS = 50


class MaxStepsError(AgentError):
    """A turn took ``max_steps`` steps and would have gone on: it ends ``{"kind":
    "error", "code": "MAX_STEPS", "message": "the turn reached its limit of N steps"}``
    after the last step's tool results are recorded."""

    code = "MAX_STEPS"


class UsageLimitError(AgentError):
    """A turn's steps used ``max_turn_tokens`` tokens (reported or estimated) and it
    would have gone on: it ends ``{"kind": "error", "code": "USAGE_LIMIT", "message":
    "the turn reached its limit of N tokens (used M)"}`` after the last step's tool
    results are recorded."""

    code = "USAGE_LIMIT"


def turn_tokens(usage: Usage) -> int:
    """What one step adds to its turn's count: the whole prompt (input, cache-read and
    cache-write tokens) and the output."""
    return (
        usage.input_tokens
        + (usage.cache_read_tokens or 0)
        + (usage.cache_write_tokens or 0)
        + usage.output_tokens
    )


def check_turn_limits(agent: LoopAgent, steps: int, used: int) -> None:
    """Before each step of a turn that took ``steps`` steps so far and used ``used``
    tokens: raise :class:`MaxStepsError` or :class:`UsageLimitError` when the agent's
    limit is reached (the step limit is looked at first). Limits are positive, so the
    first step (0 steps, 0 tokens) always runs."""
    if steps >= agent.max_steps:
        raise MaxStepsError(f"the turn reached its limit of {agent.max_steps} steps")
    limit = agent.max_turn_tokens
    if limit is not None and used >= limit:
        raise UsageLimitError(f"the turn reached its limit of {limit} tokens (used {used})")
