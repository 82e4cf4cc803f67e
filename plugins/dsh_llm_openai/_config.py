"""The ``llm-openai`` config: where the server is, which models it serves, how patient to be."""

from __future__ import annotations

from typing import Any

from dsh_llm.http import HttpModelConfig

__all__ = ["DEFAULT_BASE_URL", "OpenAICompatibleConfig"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAICompatibleConfig(HttpModelConfig):
    """Config of the ``llm-openai`` plugin (unknown keys are errors).

    ``api_key`` is sent as ``Authorization: Bearer <api_key>``; requests go to
    ``<base_url>/chat/completions``. The keys every HTTP adapter shares are
    ``dsh_llm.http.HttpModelConfig``'s.
    """

    base_url: str = DEFAULT_BASE_URL
    #: Send reasoning back as ``reasoning_content`` on assistant messages (DeepSeek
    #: thinking mode requires it once a tool was called; most servers reject or ignore it).
    send_reasoning: bool = False
    #: Sent only when set (servers differ in what they accept).
    seed: int | None = None

    def request_options(self, with_tools: bool) -> dict[str, Any]:
        """The optional body fields this config sets for a request (``with_tools``:
        the request offers tools). llama-cpp-python's server reads a missing
        ``tool_choice`` as "none" and refuses "auto" while streaming: leave it unset there."""
        options = self.sampling()
        if self.seed is not None:
            options["seed"] = self.seed
        if with_tools:
            if self.tool_choice is not None:
                options["tool_choice"] = self.tool_choice
            if self.parallel_tool_calls is not None:
                options["parallel_tool_calls"] = self.parallel_tool_calls
        return options
