"""The adapter: one streamed chat-completions call per request (the HTTP core, its
retries and its failure codes are ``dsh_llm.http``'s)."""

from __future__ import annotations

from typing import Any

from dsh_llm import LlmRequest
from dsh_llm.http import HttpAdapter

from ._config import OpenAICompatibleConfig
from ._wire import StreamDecoder, request_body

__all__ = ["OpenAIAdapter"]


class OpenAIAdapter(HttpAdapter[OpenAICompatibleConfig]):
    """Streams chat completions from one OpenAI-compatible server (a ``dsh_llm.LlmAdapter``).

    ``client`` is the ``httpx.AsyncClient`` to send with; its owner closes it. Each
    :meth:`stream` call is one provider call: up to ``1 + max_retries`` HTTP attempts
    while no response body has been read, none after.
    """

    name = "llm-openai"
    path = "/chat/completions"
    done_marker = "[DONE]"

    def auth_headers(self) -> dict[str, str]:
        key = self.config.api_key
        return {} if key is None else {"Authorization": f"Bearer {key}"}

    def request_body(self, request: LlmRequest) -> dict[str, Any]:
        config = self.config
        return request_body(
            request,
            send_reasoning=config.send_reasoning,
            options=config.request_options(bool(request.tools)),
            extra=config.extra_body,
        )

    def decoder(self, request_id: str | None) -> StreamDecoder:
        return StreamDecoder(request_id)
