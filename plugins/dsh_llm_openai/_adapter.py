"""The adapter: one streamed chat-completions call per request (the HTTP core, its
retries and its failure codes are ``dsh_llm.http``'s)."""

from __future__ import annotations

from typing import Any

from dsh_llm import LlmRequest
from dsh_llm.http import HttpAdapter

from ._config import OpenAICompatibleConfig
from ._probe import probe_window
from ._wire import StreamDecoder, request_body

__all__ = ["OpenAIAdapter"]


class OpenAIAdapter(HttpAdapter[OpenAICompatibleConfig]):
    """Streams chat completions from one OpenAI-compatible server (a ``dsh_llm.LlmAdapter``).

    ``client`` is the ``httpx.AsyncClient`` to send with; its owner closes it. Each
    :meth:`stream` call is one provider call: up to ``1 + max_retries`` HTTP attempts
    while no response body has been read, none after. A model's context window comes
    from the config, else from the server (asked once: :meth:`probe_context_window`).
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
            options=config.request_options(
                bool(request.tools), request.step, {tool.name for tool in request.tools}
            ),
            extra=config.extra_body,
        )

    def decoder(self, request_id: str | None) -> StreamDecoder:
        return StreamDecoder(request_id)

    async def probe_context_window(self, model: str) -> int | None:
        """Ask the server (vLLM's ``/models``, llama.cpp's ``/props``, Ollama's
        ``/api/show``; see ``_probe``), unless ``probe_context_window`` is off."""
        config = self.config
        if not config.probe_context_window:
            return None
        headers = {**self._headers, "Accept": "application/json"}
        return await probe_window(
            self._client,
            config.base_url,
            model,
            headers=headers,
            patience=config.connect_timeout,
            log=self._log,
        )
