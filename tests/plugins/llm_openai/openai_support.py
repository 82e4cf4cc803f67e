"""The OpenAI-compatible loopback server of the llm-openai tests, on the generic one in
``tests/plugins/llm_http_support.py``: chat-completion frame builders, and a strict mode
that validates requests as llama-cpp-python's server does."""

from __future__ import annotations

from typing import Any

from dsh_llm_openai import OpenAICompatible
from tests.plugins.llm_http_support import HTTPX_GC_WARNING, LoopbackServer, Reply, final_failure

__all__ = [
    "HTTPX_GC_WARNING",
    "OpenAIServer",
    "final_failure",
    "llama_cpp_problems",
    "llama_cpp_tool_choice",
]


def llama_cpp_problems(messages: list[Any]) -> list[str]:
    """What llama-cpp-python's server refuses in a request's messages: every message
    needs a string ``content`` (an assistant message that only calls tools too: null
    or a missing key are validation errors), a known role, and a tool message needs
    the id of a call made before it."""
    problems: list[str] = []
    called: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            problems.append(f"messages.{i}.role: unknown role {role!r}")
        if not isinstance(message.get("content"), str):
            problems.append(f"messages.{i}.content: Input should be a valid string")
        for call in message.get("tool_calls") or ():
            called.add(call["id"])
        if role == "tool" and message.get("tool_call_id") not in called:
            problems.append(f"messages.{i}.tool_call_id: no earlier tool call has this id")
    return problems


def llama_cpp_tool_choice(body: dict[str, Any]) -> Reply | None:
    """What llama-cpp-python's server (``chatml-function-calling``, 0.3.36) does with a
    request's ``tool_choice``, when it does not stream an answer: a shape other than
    "none", "auto", "required" or ``{type: function, function: {name}}`` is a 500
    validation error; a function the request does not offer is a 500; "required"
    fails inside the server after the 200 was sent (an empty stream). None: it answers."""
    choice = body.get("tool_choice")
    if choice is None or choice in ("none", "auto"):
        return None
    if choice == "required":
        return Reply(200, {"Content-Type": "text/event-stream"})
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if (
        not isinstance(choice, dict)
        or choice.get("type") != "function"
        or set(choice)
        != {
            "type",
            "function",
        }
    ):
        return Reply.json(500, {"error": {"message": f"tool_choice: invalid {choice!r}"}})
    offered = [tool["function"]["name"] for tool in body.get("tools") or ()]
    if name not in offered:
        return Reply.json(500, {"error": {"message": f"Tool with name '{name}' not found"}})
    return None


class OpenAIServer(LoopbackServer):
    """A scripted chat-completions server."""

    plugin = OpenAICompatible
    api_root = "/v1"

    def __init__(self) -> None:
        super().__init__()
        #: Validate message shapes as llama-cpp-python's server does: a request that
        #: breaks them is answered 500 with the validation errors (and not scripted).
        self.strict = False
        #: Answer 400 "maximum context length" to a request whose messages hold more
        #: characters than this (None: no limit).
        self.context_chars: int | None = None
        #: Answer a request over ``context_chars`` as llama-cpp-python's server does: a
        #: 200 with an empty stream (the server fails after its headers), not a 400.
        self.empty_overflow = False
        #: Ollama's model endpoint is not a chat-completions call: not found, unless routed.
        self.routes[("POST", "/api/show")] = Reply.json(404, {"error": "not found"})

    # -- frame builders ------------------------------------------------------------------

    @staticmethod
    def delta(
        content: str | None = None,
        *,
        reasoning: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        finish: str | None = None,
        usage: dict[str, Any] | None = None,
        role: str | None = None,
    ) -> dict[str, Any]:
        """A ``chat.completion.chunk`` with one choice."""
        delta: dict[str, Any] = {}
        if role is not None:
            delta["role"] = role
        if content is not None:
            delta["content"] = content
        if reasoning is not None:
            delta["reasoning_content"] = reasoning
        if tool_calls is not None:
            delta["tool_calls"] = tool_calls
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": usage,
        }

    @staticmethod
    def tool(
        index: int,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str | None = None,
    ) -> dict[str, Any]:
        """One tool-call fragment (the id and name belong on the first)."""
        call: dict[str, Any] = {"index": index}
        function: dict[str, Any] = {}
        if id is not None:
            call["id"] = id
            call["type"] = "function"
        if name is not None:
            function["name"] = name
        if arguments is not None:
            function["arguments"] = arguments
        if function:
            call["function"] = function
        return call

    @staticmethod
    def usage(
        prompt: int, completion: int, *, cached: int | None = None, reasoning: int | None = None
    ) -> dict[str, Any]:
        """The usage-only final chunk (``choices: []``), OpenAI style."""
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if reasoning is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": usage,
        }

    def ok(self, text: str = "ok") -> None:
        self.stream(self.delta(text), self.delta(finish="stop"), "[DONE]")

    def partial(self, text: str) -> list[Any]:
        return [self.delta(text, role="assistant")]

    def refusal(self, body: Any) -> Reply | None:
        """The answer of a server that validates what it is sent (see ``strict`` and
        ``context_chars``), or None when the request passes."""
        messages = body.get("messages", []) if isinstance(body, dict) else []
        if self.strict:
            problems = llama_cpp_problems(messages)
            if problems:
                return Reply.json(500, {"detail": problems})
            refused = llama_cpp_tool_choice(body) if isinstance(body, dict) else None
            if refused is not None:
                return refused
        if self.context_chars is not None:
            size = sum(len(str(m.get("content") or "")) for m in messages)
            if size > self.context_chars:
                if self.empty_overflow:
                    return Reply(200, {"Content-Type": "text/event-stream"})
                error = {
                    "error": {
                        "message": f"This model's maximum context length is "
                        f"{self.context_chars} tokens; your request has {size}",
                        "type": "invalid_request_error",
                    }
                }
                return Reply.json(400, error)
        return None
