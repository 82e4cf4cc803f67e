"""The adapter: one streamed Messages call per request (the HTTP core, its retries and
its failure codes are ``dsh_llm.http``'s)."""

from __future__ import annotations

from typing import Any

from dsh_llm import LlmRequest
from dsh_llm.http import HttpAdapter

from ._config import AnthropicConfig
from ._wire import StreamDecoder, request_body

__all__ = ["AnthropicAdapter"]


class AnthropicAdapter(HttpAdapter[AnthropicConfig]):
    """Streams Claude's answers from the Messages API (a ``dsh_llm.LlmAdapter``): the key
    goes in ``x-api-key`` with the ``anthropic-version`` header; the calls, retries and
    failures are :class:`dsh_llm.http.HttpAdapter`'s."""

    name = "llm-anthropic"
    path = "/v1/messages"

    def auth_headers(self) -> dict[str, str]:
        config = self.config
        headers = {"anthropic-version": config.anthropic_version}
        if config.api_key is not None:
            headers["x-api-key"] = config.api_key
        return headers

    def request_body(self, request: LlmRequest) -> dict[str, Any]:
        config = self.config
        return request_body(
            request,
            max_tokens=config.max_tokens,
            thinking_budget=None if config.thinking is None else config.thinking.budget_tokens,
            options=config.request_options(bool(request.tools)),
            extra=config.extra_body,
        )

    def decoder(self, request_id: str | None) -> StreamDecoder:
        return StreamDecoder(request_id)
