"""The turn several benchmarks time: ``STEPS`` steps that each call an ``echo`` tool,
then an answer, from the scripted model with a fixed usage per step."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from dsh import Context
from dsh.testing import ScriptedModel, text, tool_call, tool_calls
from dsh_agent_core import AgentCore
from dsh_tools import Tool, ToolCall

__all__ = ["ECHO", "STEPS", "USAGE", "install_echo_turn"]

#: Tool steps in the turn (one more step answers).
STEPS = 100
#: The usage the model reports for each step: (input, output, cache read).
USAGE = (1200, 40, 800)


class _Args(BaseModel):
    text: str = ""


async def _echo(args: _Args, call: ToolCall) -> str:
    return args.text


#: The tool: it answers its ``text``.
ECHO = Tool(name="echo", description="e", parameters=_Args, execute=_echo)


def _reply(request: Any) -> Any:
    if request.step <= STEPS:
        return tool_calls(tool_call("echo", {"text": "hi"}), usage=USAGE)(request)
    return text("done", usage=USAGE)


async def install_echo_turn(root: Context) -> None:
    """Load agent-core (room for the turn's steps), the scripted model (serving model
    ``m``) and the ``echo`` tool on ``root``."""
    await root.plugin(AgentCore, {"max_steps": STEPS + 10})
    ScriptedModel(respond=_reply, models=["m"]).install(root)
    root.tools.register(ECHO)
