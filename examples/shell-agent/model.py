"""A scripted model for the shell example: no network, no API key.

``run <command>`` becomes a call of the ``bash`` tool with that command; a tool result
becomes an answer quoting it; anything else gets a hint. Built on
``dsh.testing.ScriptedModel`` answering through a function of the request.
"""

from __future__ import annotations

from typing import Any

from dsh import Context, Disposer
from dsh.testing import ScriptedModel, text, tool_call, tool_calls
from dsh_llm import LlmRequest, ToolResultBlock

name = "shell-mock-model"
inject = ["llm"]


def respond(request: LlmRequest) -> Any:
    last = request.messages[-1]
    results = [block for block in last.content if isinstance(block, ToolResultBlock)]
    if results:
        return text(f"The command printed: {results[-1].content}")
    words = last.text.strip()
    if words.startswith("run "):
        return tool_calls(tool_call("bash", {"command": words[4:]}))
    return text("Say `run <command>` and I will run it with bash.")


def apply(ctx: Context, config: None) -> Disposer:
    return ScriptedModel(respond=respond, models=["shell-mock"]).install(ctx)
